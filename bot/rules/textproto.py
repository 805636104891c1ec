"""The text tool protocol (``native_tools = false``) and reasoning-tag parsing.

The model asks for tools by writing ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``
blocks in its reply; results go back as ``<tool_result name="...">...</tool_result>`` blocks.
Only JSON inside a ``<tool_call>`` tag is ever executed; JSON elsewhere in the reply is prose.
"""

from __future__ import annotations

import html
import json
import re
from dataclasses import dataclass
from typing import Any
from collections.abc import Iterable

_OPEN = re.compile(r"<tool_call\s*>", re.IGNORECASE)
_CLOSE = re.compile(r"</tool_call\s*>", re.IGNORECASE)
_FENCE = re.compile(r"^```[\w+-]*[ \t]*\n?(?P<body>.*?)\n?[ \t]*```\s*$", re.DOTALL)
_FENCE_OPEN = re.compile(r"^```[\w+-]*[ \t]*\n?")
_BLANKS = re.compile(r"\n{3,}")


@dataclass(frozen=True)
class ParsedCall:
    name: str
    arguments: dict[str, Any] | None
    error: str | None = None


def _strip_fence(body: str) -> str:
    body = body.strip()
    m = _FENCE.match(body)
    if m:
        return m.group("body").strip()
    if body.startswith("```"):  # unclosed fence
        body = _FENCE_OPEN.sub("", body, count=1)
        body = body.rstrip()
        if body.endswith("```"):
            body = body[:-3]
    return body.strip()


def _decode(body: str) -> ParsedCall:
    raw = _strip_fence(body)
    if not raw:
        return ParsedCall("", None, "empty <tool_call> block")
    obj: Any
    try:
        obj = json.loads(raw)
    except json.JSONDecodeError as exc:
        # tolerate trailing junk after a complete object
        start = raw.find("{")
        try:
            if start < 0:
                raise ValueError
            obj, _ = json.JSONDecoder().raw_decode(raw[start:])
        except ValueError:
            return ParsedCall(
                _guess_name(raw),
                None,
                f"tool call is not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})",
            )
    return _decode_object(obj)


def _decode_object(obj: Any) -> ParsedCall:
    if not isinstance(obj, dict):
        return ParsedCall("", None, 'tool call must be a JSON object with "name" and "arguments"')
    name = obj.get("name")
    if not isinstance(name, str) or not name.strip():
        return ParsedCall("", None, 'tool call has no "name"')
    args = obj.get("arguments", obj.get("parameters", {}))
    if args is None:
        args = {}
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except json.JSONDecodeError as exc:
            return ParsedCall(name.strip(), None, f"arguments are not valid JSON: {exc.msg}")
    if not isinstance(args, dict):
        return ParsedCall(name.strip(), None, '"arguments" must be a JSON object')
    return ParsedCall(name.strip(), args, None)


_NAME_HINT = re.compile(r"\"name\"\s*:\s*\"([^\"]+)\"")


def _guess_name(raw: str) -> str:
    m = _NAME_HINT.search(raw)
    return m.group(1).strip() if m else ""


def _json_object_end(body: str) -> int | None:
    """Where the JSON object at the start of ``body`` (after blanks or a code fence
    opener) ends, including a closing fence right after it; None when there is none."""
    m = re.match(r"\s*(?:```[\w-]*\s*)?", body)
    start = m.end() if m else 0
    if not body.startswith("{", start):
        return None
    try:
        _, end = json.JSONDecoder().raw_decode(body, start)
    except ValueError:
        return None
    close = re.match(r"\s*```", body[end:])
    return end + close.end() if close and "```" in body[:start] else end


# closing tags local models write instead of </tool_call> (</arg_value>, </invoke>,
# </minimax:tool_call>): right after a call's JSON they close the call, not prose
_WRONG_CLOSERS = re.compile(r"(?:[ \t]*\n?[ \t]*</[A-Za-z][\w:.\-]*\s*>)+")


def _skip_wrong_closers(text: str, pos: int) -> int:
    m = _WRONG_CLOSERS.match(text, pos)
    return m.end() if m else pos


def parse_tool_calls(text: str) -> tuple[str, list[ParsedCall]]:
    """Split a reply into (visible text, tool calls) per the Tool Use Protocol."""
    if not text:
        return "", []
    calls: list[ParsedCall] = []
    visible: list[str] = []
    pos = 0
    while True:
        m = _OPEN.search(text, pos)
        if not m:
            visible.append(text[pos:])
            break
        visible.append(text[pos : m.start()])
        body_start = m.end()
        close = _CLOSE.search(text, body_start)
        nxt = _OPEN.search(text, body_start)
        if close and (not nxt or close.start() < nxt.start()):
            body, pos = text[body_start : close.start()], close.end()
        else:  # missing close tag: the call is the JSON object; what follows it is text
            end = nxt.start() if nxt else len(text)
            body, pos = text[body_start:end], end
            obj_end = _json_object_end(body)
            if obj_end is not None:
                body, pos = body[:obj_end], body_start + obj_end
                pos = _skip_wrong_closers(text, pos)
        calls.append(_decode(body))
    out = "".join(visible)
    out = _CLOSE.sub("", out)  # stray closing tags
    out = _BLANKS.sub("\n\n", out).strip()
    return out, calls


def _escape_body(content: str) -> str:
    """Tool output is untrusted: it can neither close its block early nor open
    a block that looks like another tool's result or a tool call."""
    content = re.sub(r"</(tool_result|tool_call)\s*>", r"&lt;/\1&gt;", content, flags=re.IGNORECASE)
    return re.sub(r"<(/?)(tool_result|tool_call)\b", r"&lt;\1\2", content, flags=re.IGNORECASE)


def format_tool_results(results: Iterable[tuple[str, str]]) -> str:
    """Render results as ``<tool_result name="...">`` blocks, one per call, in order."""
    blocks = []
    for name, content in results:
        blocks.append(
            f'<tool_result name="{html.escape(name, quote=True)}">\n{_escape_body(content)}\n</tool_result>'
        )
    return "\n".join(blocks)


_THINK = re.compile(
    r"<(think|thinking)\s*>(.*?)(?:</\1\s*>|(?=<final\s*>)|\Z)", re.DOTALL | re.IGNORECASE
)
_FINAL = re.compile(r"<final\s*>(.*?)(?:</final\s*>|\Z)", re.DOTALL | re.IGNORECASE)
_STRAY = re.compile(r"</?(?:think|thinking|final)\s*>", re.IGNORECASE)


def split_reasoning(text: str) -> tuple[str, str]:
    """Return (visible, thinking) for replies using ``<think>`` / ``<final>`` tags.

    ``visible`` is the content of ``<final>`` when present, otherwise the text with the
    ``<think>`` blocks removed (an unclosed ``<think>`` hides everything after it).
    """
    if not text:
        return "", ""
    thinking = "\n\n".join(m.group(2).strip() for m in _THINK.finditer(text) if m.group(2).strip())
    finals = [m.group(1) for m in _FINAL.finditer(_THINK.sub("", text))]
    if finals:
        visible = "\n\n".join(f.strip() for f in finals if f.strip())
    else:
        visible = _THINK.sub("", text)
    visible = _STRAY.sub("", visible)
    visible = _BLANKS.sub("\n\n", visible).strip()
    return visible, thinking


def strip_thinking(text: str) -> str:
    """The text with ``<think>`` blocks removed (``<final>`` tags kept)."""
    return _THINK.sub("", text or "")
