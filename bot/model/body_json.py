"""The JSON of a Chat Completions request body, byte for byte what
``json.dumps(body, ensure_ascii=False, separators=(",", ":"))`` gives, with the long strings
of its messages encoded once and reused.

Every turn of a session sends the same system prompt, the same earlier messages and the
same tool schemas again; encoding them was most of the body's cost (measured: ~40 of ~60 µs
for the system prompt of a 7.7 KB body, ~50 µs for 3.3 KB of eight tools' schemas).

- A string of at least ``LONG`` characters that is the whole value of a message's field
  (``content`` as text) is escaped once and its JSON looked up by value the next time (one
  hash and one compare instead of the escaping).
- A list or dict beside the messages (``tools``, ``response_format``…) is looked up by its
  ``marshal`` bytes, which spell out every type and value exactly (``True``, ``1`` and
  ``1.0`` differ, subclasses are refused and encoded as before): equal bytes, equal JSON.

Everything else is encoded by the same encoder as before; a body of another shape is
encoded whole.
"""

from __future__ import annotations

import json
import marshal
from typing import Any

LONG = 256  # characters: shorter strings cost less to escape than to look up
MAX_ENTRIES = 512
MAX_CHARS = 2_000_000  # emptied past this many characters (the strings and their JSON: a few MB)

_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
_cache: dict[str, str] = {}
_chars = 0
MAX_VALUES = 32
_values: dict[bytes, str] = {}


def _long_string(text: str) -> str:
    global _chars  # noqa: PLW0603 - one process-wide cache of escaped strings
    if len(text) > MAX_CHARS // 8:
        return _encode(text)  # a huge one would empty the cache every turn: not kept
    hit = _cache.get(text)
    if hit is None:
        hit = _encode(text)
        if len(_cache) >= MAX_ENTRIES or _chars + len(text) > MAX_CHARS:
            _cache.clear()
            _chars = 0
        _cache[text] = hit
        _chars += len(text)
    return hit


def _value(value: Any) -> str:
    """A top-level value's JSON; lists and dicts from the cache, by their exact contents."""
    if type(value) is not list and type(value) is not dict:
        return _encode(value)
    try:
        key = marshal.dumps(value)
    except ValueError:  # a subclass or an object marshal cannot spell: encoded as it is
        return _encode(value)
    hit = _values.get(key)
    if hit is None:
        hit = _encode(value)
        if len(_values) >= MAX_VALUES:
            _values.clear()
        _values[key] = hit
    return hit


def _message(message: Any) -> str | None:
    """A message's JSON; None when a key is not a string (json.dumps converts those)."""
    if type(message) is not dict:
        return _encode(message)
    parts = []
    for key, value in message.items():
        if type(key) is not str:
            return None
        if type(value) is str and len(value) >= LONG:
            parts.append(f"{_encode(key)}:{_long_string(value)}")
        else:
            parts.append(f"{_encode(key)}:{_value(value)}")
    return "{" + ",".join(parts) + "}"


def _messages(messages: list[Any]) -> str | None:
    encoded = []
    for message in messages:
        one = _message(message)
        if one is None:
            return None
        encoded.append(one)
    return "[" + ",".join(encoded) + "]"


def dumps(body: Any) -> str:
    """``json.dumps(body, ensure_ascii=False, separators=(",", ":"))``, the same string."""
    if type(body) is not dict or type(body.get("messages")) is not list:
        return _encode(body)
    parts = []
    for key, value in body.items():
        if type(key) is not str:
            return _encode(body)
        if key == "messages":
            encoded = _messages(value)
            if encoded is None:
                return _encode(body)
            parts.append(f'"messages":{encoded}')
        else:
            parts.append(f"{_encode(key)}:{_value(value)}")
    return "{" + ",".join(parts) + "}"
