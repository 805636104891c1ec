"""Redact secrets from text before a model (or a log) sees it.

Used by the core (tool output, logs) and by adapters (a library's own logger), so it
lives on the channels side: ``channels/`` never imports ``bot/``.

Two rules:

* every configured secret value of 4+ characters, wherever it appears;
* ``key=value`` / ``key: value`` / ``"key": "value"`` pairs whose key mentions a token, api key,
  password, secret, bearer or credential, when the value has 8+ characters; plus
  ``Authorization: Bearer <token>`` style headers.

A redacted value keeps its first 4 characters followed by ``*[REDACTED]``.  Scrubbing is
idempotent.  The first rule alone guards the logs (:class:`RedactSecrets`) and whatever a
command line prints (:class:`RedactingStream`).
"""

from __future__ import annotations

import contextlib
import logging
import re
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TextIO

MARK = "*[REDACTED]"
_MIN_SECRET = 4
_MIN_VALUE = 8

# Bounded affixes and a "start of word" lookbehind keep this linear on long runs of word characters.
_KEY = (
    r"(?<![A-Za-z0-9_.\-])[A-Za-z0-9_.\-]{0,64}"
    r"(?:token|api[_\-]?key|apikey|password|passwd|secret|bearer|credential)"
    r"[A-Za-z0-9_.\-]{0,64}(?![A-Za-z0-9_.\-])"
)

_PAIR = re.compile(
    r"(?P<key>(?P<kq>[\"']?)" + _KEY + r"(?P=kq))"
    r"(?P<sep>[ \t]*[:=][ \t]*)"
    r"(?:\"(?P<dq>(?:[^\"\\\n]|\\.)*)\"|'(?P<sq>[^'\n]*)'|(?P<bare>[^\s\"'`,;&<>(){}\[\]]+(?:\*\[REDACTED\])?))",
    re.IGNORECASE,
)

_AUTH = re.compile(
    r"(?P<pre>\b(?:bearer|basic|token)[ \t]+)(?P<val>[A-Za-z0-9._~+/=\-]{8,}(?:\*\[REDACTED\])?)",
    re.IGNORECASE,
)


def _redact_value(value: str) -> str:
    if MARK in value:
        return value
    return value[:4] + MARK


def _pair_sub(m: re.Match[str]) -> str:
    for group, quote in (("dq", '"'), ("sq", "'"), ("bare", "")):  # noqa: B007 - quote is used after the loop
        value = m.group(group)
        if value is not None:
            break
    else:  # pragma: no cover - the regex always sets one
        return m.group(0)
    if len(value) < _MIN_VALUE or MARK in value:
        return m.group(0)
    return f"{m.group('key')}{m.group('sep')}{quote}{_redact_value(value)}{quote}"


def _auth_sub(m: re.Match[str]) -> str:
    pre = m.group("pre")
    # "token <value>" alone is too loose for prose; only redact it after "Authorization:".
    if pre.lower().startswith("token"):
        head = m.string[max(0, m.start() - 40) : m.start()].lower()
        if "authorization" not in head:
            return m.group(0)
    return pre + _redact_value(m.group("val"))


def redact_values(text: str, secrets: Iterable[str]) -> str:
    """The first rule alone: every secret value of 4+ characters in ``text`` redacted."""
    if not text:
        return text
    values = sorted({s for s in secrets if s and len(s) >= _MIN_SECRET}, key=len, reverse=True)
    for value in values:
        if value in text:
            text = text.replace(value, value[:4] + MARK)
    return text


def scrub(text: str, secrets: Iterable[str] = ()) -> str:
    """Return ``text`` with secret values and credential-looking pairs redacted."""
    if not text:
        return text
    text = redact_values(text, secrets)
    text = _PAIR.sub(_pair_sub, text)
    text = _AUTH.sub(_auth_sub, text)
    return text


class RedactSecrets(logging.Filter):
    """Log filter: :func:`redact_values` on every record's message and traceback.

    On a handler it covers every logger; on one logger (an adapter guarding its own
    library's logger) only the records logged there."""

    def __init__(self, secrets: Iterable[str]) -> None:
        super().__init__()
        self.secrets = tuple(s for s in secrets if s and len(s) >= _MIN_SECRET)

    def filter(self, record: logging.LogRecord) -> bool:
        if not self.secrets:
            return True
        try:
            message = record.getMessage()
        except Exception:
            return True
        redacted = redact_values(message, self.secrets)
        if redacted != message:
            record.msg, record.args = redacted, ()
        if record.exc_info and record.exc_info[1] is not None:
            text = logging.Formatter().formatException(record.exc_info)
            record.exc_text, record.exc_info = redact_values(text, self.secrets), None
        return True


class RedactingStream:
    """A text stream that writes through :func:`redact_values` to ``stream``: stdout and stderr
    of a command line, so everything it prints gets the same redaction as the logs.

    ``secrets`` is called at each write, so values registered after the stream was
    installed (a config loaded later) are redacted too.  Everything else (``fileno``,
    ``isatty``, ``encoding``, ``buffer``...) is the wrapped stream's."""

    def __init__(self, stream: TextIO, secrets: Callable[[], Iterable[str]]) -> None:
        self.stream = stream
        self._secrets = secrets

    def write(self, text: str) -> int:
        if getattr(self.stream, "closed", False):
            # a logging handler made while a command ran keeps this wrapper after the command
            # ended and its stream was closed (a test's capture): the line has nowhere to go,
            # and raising here would make logging print a traceback from inside a finaliser
            return len(text)
        self.stream.write(redact_values(text, self._secrets()))
        return len(text)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


@contextlib.contextmanager
def redacted_stdio(secrets: Callable[[], Iterable[str]]) -> Iterator[None]:
    """While the block runs, ``sys.stdout`` and ``sys.stderr`` are :class:`RedactingStream`s:
    a command line's one output path (nothing it prints shows a secret)."""
    saved = sys.stdout, sys.stderr
    sys.stdout = RedactingStream(saved[0], secrets)
    sys.stderr = RedactingStream(saved[1], secrets)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved
