"""What a model call returns: :class:`Completion` (text, tool calls, usage, cost), built
from a provider's answer (OpenAI's shape, or litellm's normalised one, dicts or objects)."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any

from bot.model.errors import empty_answer
from bot.rules.untrusted import valid_utf8


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # raw JSON text as the model produced it


@dataclass
class Completion:
    text: str
    tool_calls: list[ToolCall] = field(default_factory=list)
    # prompt_tokens, completion_tokens, total_tokens; cached_tokens and cache_write_tokens
    # when the provider reports any
    usage: dict[str, int] = field(default_factory=dict)
    raw_finish_reason: str | None = None
    model: str = ""  # the model string that answered (a fallback's, after a failover)
    cost: float = 0.0  # USD, from litellm's local cost map; 0 when the model is not in it


def _get(obj: Any, key: str, default: Any = None) -> Any:
    if obj is None:
        return default
    if isinstance(obj, dict):
        return obj.get(key, default)
    return getattr(obj, key, default)


def _int(v: Any) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else 0


def usage_numbers(u: Any) -> dict[str, int]:
    """Token counts of a response's ``usage`` (OpenAI's shape, or litellm's normalised one):
    prompt, completion, total, and the prompt tokens read from (or written to) a cache."""
    usage: dict[str, int] = {}
    for k in ("prompt_tokens", "completion_tokens", "total_tokens"):
        v = _get(u, k)
        if isinstance(v, int):
            usage[k] = v
    cached = _int(_get(_get(u, "prompt_tokens_details"), "cached_tokens")) or _int(
        _get(u, "cache_read_input_tokens")
    )
    if cached:
        usage["cached_tokens"] = cached
    written = _int(_get(u, "cache_creation_input_tokens"))
    if written:
        usage["cache_write_tokens"] = written
    return usage


def content_text(content: Any) -> Any:
    """A message's content as text when it came as content parts (a list)."""
    if content and not isinstance(content, str):
        return "".join(_get(p, "text", "") or "" for p in content)
    return content


def arguments_text(args: Any) -> str:
    """A tool call's arguments as JSON text (some providers hand back an object)."""
    if args is None:
        return ""
    return args if isinstance(args, str) else json.dumps(args)


def tool_call(call_id: Any, name: str, arguments: str) -> ToolCall:
    return ToolCall(
        id=call_id or f"call_{uuid.uuid4().hex[:16]}",
        name=valid_utf8(name),
        arguments=valid_utf8(arguments),
    )


def _parse_response(resp: Any) -> Completion:
    choices = _get(resp, "choices") or []
    if not choices:
        raise empty_answer()
    choice = choices[0]
    msg = _get(choice, "message")
    text = content_text(_get(msg, "content")) or ""
    calls = [
        tool_call(
            _get(tc, "id"),
            _get(_get(tc, "function"), "name") or "",
            arguments_text(_get(_get(tc, "function"), "arguments")),
        )
        for tc in _get(msg, "tool_calls") or []
    ]
    return Completion(
        text=valid_utf8(text),
        tool_calls=calls,
        usage=usage_numbers(_get(resp, "usage")),
        raw_finish_reason=_get(choice, "finish_reason"),
    )
