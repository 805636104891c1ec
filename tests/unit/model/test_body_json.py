"""bot.model.body_json.dumps gives the very string json.dumps gives for the light path's
request body (ensure_ascii=False, compact separators), whatever the body holds, including
when its long strings come from the cache."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from bot.model import body_json


def _reference(body: Any) -> str:
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"))


SYSTEM = 'You are a personal assistant — «Chela» ✓ \U0001f600\n\t"quoted" \\ back\u2028' * 40


def _body(**extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": "fake-model",
        "messages": [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": "hi"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "c1", "type": "function"}],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "x" * 300},
            {"role": "user", "content": [{"type": "text", "text": "y" * 400}]},
        ],
        "tools": [{"type": "function", "function": {"name": "t", "parameters": {}}}],
        "temperature": 0.5,
    }
    body.update(extra)
    return body


def test_a_turns_body_is_encoded_as_json_dumps_encodes_it() -> None:
    body = _body(stream=True, max_tokens=10, stop=None, nan=float("nan"))
    assert body_json.dumps(body) == _reference(body)
    assert body_json.dumps(body) == _reference(body)  # again, from the cache


def test_a_cached_string_is_looked_up_by_value_not_identity() -> None:
    first = _body()
    body_json.dumps(first)
    changed = _body()
    changed["messages"][0]["content"] = SYSTEM[:-1] + "!"  # same length, another last char
    assert body_json.dumps(changed) == _reference(changed)
    copy = _body()
    copy["messages"][0]["content"] = "".join(list(SYSTEM))  # equal value, another object
    assert body_json.dumps(copy) == _reference(copy)


@pytest.mark.parametrize(
    "body",
    [
        {"messages": [{1: "int key"}], "model": "m"},
        {"messages": [{"role": "user", "content": "a" * 500, None: 1}]},
        {1: "x", "messages": []},
        {"messages": ["not a dict", 3, None, [1, 2]]},
        {"messages": ({"role": "user", "content": "a tuple"},)},
        {"model": "no messages"},
        [{"messages": []}],
        "a string",
    ],
)
def test_other_shapes_are_encoded_as_json_dumps_encodes_them(body: Any) -> None:
    assert body_json.dumps(body) == _reference(body)


def test_the_cache_stays_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(body_json, "MAX_ENTRIES", 8)
    for i in range(50):
        body = {"messages": [{"role": "user", "content": f"{i}" + "z" * 300}]}
        assert body_json.dumps(body) == _reference(body)
        assert len(body_json._cache) <= 8


def test_random_bodies_match_json_dumps() -> None:
    rnd = random.Random(28)

    def text() -> str:
        n = rnd.choice([0, 5, 255, 256, 257, 900])
        return "".join(
            chr(rnd.choice([rnd.randrange(0, 128), rnd.randrange(128, 0xD7FF)])) for _ in range(n)
        )

    def value(depth: int = 0) -> Any:
        kinds = ["s", "i", "f", "b", "n"] + (["l", "d"] if depth < 3 else [])
        kind = rnd.choice(kinds)
        if kind == "s":
            return text()
        if kind == "i":
            return rnd.randrange(-(10**12), 10**12)
        if kind == "f":
            return rnd.random() * 1e6
        if kind == "b":
            return rnd.random() < 0.5
        if kind == "n":
            return None
        if kind == "l":
            return [value(depth + 1) for _ in range(rnd.randrange(4))]
        return {text()[:8]: value(depth + 1) for _ in range(rnd.randrange(4))}

    for _ in range(300):
        messages = [{"role": "user", "content": text(), "extra": value()} for _ in range(3)]
        body = {"model": "m", "messages": messages, "opts": value()}
        assert body_json.dumps(body) == _reference(body)


def test_tool_schemas_changed_in_place_are_encoded_anew() -> None:
    tools = [{"type": "function", "function": {"name": "t", "parameters": {"default": True}}}]
    body = {"model": "m", "messages": [], "tools": tools}
    assert body_json.dumps(body) == _reference(body)
    # values that compare equal but are spelled differently in JSON: True, 1, 1.0
    for value in (1, 1.0, True, "1"):
        tools[0]["function"]["parameters"]["default"] = value
        assert body_json.dumps(body) == _reference(body)
    tools.append({"type": "function", "function": {"name": "u"}})
    assert body_json.dumps(body) == _reference(body)


def test_containers_marshal_refuses_are_encoded_as_they_are() -> None:
    from collections import OrderedDict

    body = {"messages": [], "tools": [OrderedDict(type="function")], "meta": OrderedDict(a=1)}
    assert body_json.dumps(body) == _reference(body)


def test_a_huge_string_is_encoded_without_emptying_the_cache() -> None:
    small = {"messages": [{"role": "system", "content": "s" * 300}]}
    body_json.dumps(small)
    huge = {"messages": [{"role": "tool", "content": "h" * (body_json.MAX_CHARS // 8 + 1)}]}
    assert body_json.dumps(huge) == _reference(huge)
    assert "s" * 300 in body_json._cache
    assert all(len(k) <= body_json.MAX_CHARS // 8 for k in body_json._cache)
