"""Stored messages as the Control UI shows them (the message object), read through
the store's views (bot/store/views.py)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from bot.rules.replies import parse_reply
from bot.rules.textproto import split_reasoning
from bot.store import Store
from bot.ui.api.images import images_of

_META = "[Message metadata from the platform."
_FIELD = re.compile(r"^(channel|message_id): (.*)$", re.MULTILINE)


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # multimodal parts: the text ones
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def user_view(text: str) -> tuple[str, str, str | None]:
    """A stored user turn → (what the sender wrote, channel, the web message's id)."""
    if not text.startswith(_META):
        return text, "", None
    head, sep, body = text.partition("[Message]\n")
    fields = dict(_FIELD.findall(head))
    channel = fields.get("channel", "")
    cid = fields.get("message_id") if channel == "web" else None
    return (body if sep else text), channel, cid


def message_view(
    row_id: int, data: dict, created: float, channel: str, kind: str = "chat"
) -> dict | None:
    """One stored message as §16.4's object; None for what is not listed (tool results
    of the text protocol, an assistant tool-call step without text, a silent reply, a
    heartbeat's prompt and its acks: only an alert it delivered is listed)."""
    heartbeat = kind == "heartbeat"
    role = data.get("role")
    text = _content_text(data.get("content"))
    out: dict[str, Any] = {
        "id": row_id,
        "role": role,
        "text": text,
        "created": created,
        "channel": channel,
        "client_msg_id": None,
        "tool": None,
        "images": images_of(row_id, data),
    }
    if role == "user":
        if heartbeat or text.lstrip().startswith("<tool_result"):
            return None
        out["text"], seen_channel, out["client_msg_id"] = user_view(text)
        out["channel"] = seen_channel or channel
    elif role == "assistant":
        plan = parse_reply(split_reasoning(text)[0], heartbeat=heartbeat)
        if plan.silent or not (plan.text.strip() or out["images"]):
            return None
        out["text"] = plan.text
    elif role == "tool" and not heartbeat:
        out["tool"] = {"name": data.get("name") or "", "ok": True, "duration_ms": None}
    else:
        return None
    return out


def tool_names(messages: Iterable[dict]) -> dict[str, str]:
    """Tool call id → tool name, from the assistant messages that made the calls."""
    out: dict[str, str] = {}
    for m in messages:
        for call in m.get("tool_calls") or ():
            fn = call.get("function") or {}
            out[str(call.get("id", ""))] = str(fn.get("name", ""))
    return out


def channel_of(key: str) -> str:
    """The channel a session key names ("" for the main session and scheduled ones)."""
    parts = key.split(":")
    if len(parts) >= 4 and parts[3] in ("direct", "group", "channel"):
        return parts[2]
    if len(parts) >= 3 and parts[2] in ("http", "http-stateless"):
        return "http"
    return ""


def messages(store: Store, key: str, *, before: int | None, limit: int) -> tuple[list[dict], bool]:
    """The listed messages of the session's current epoch, oldest first, and whether older
    ones exist.  Heartbeat acks and compacted-away messages are not listed."""
    rows = store.transcript_rows(key, before=before)
    out: list[dict] = []
    has_more = False
    channel = channel_of(key)
    names = tool_names(r.data for r in rows)
    for r in reversed(rows):
        view = message_view(r.id, r.data, r.created, channel, r.kind)
        if view is None:
            continue
        if view["tool"] is not None:
            call_id: Any = r.data.get("tool_call_id")
            view["tool"]["name"] = view["tool"]["name"] or names.get(call_id, "")
        if len(out) >= limit:
            has_more = True
            break
        out.append(view)
    out.reverse()
    return out, has_more


def answer_of(store: Store, key: str, turn: str) -> dict | None:
    """The assistant message a stored turn ended with."""
    for r in store.turn_answers(key, turn):
        view = message_view(r.id, r.data, r.created, "web")
        if view is not None:
            return view
    return None


def turn_cost(store: Store, key: str, turn: str) -> float:
    """What a turn's model calls cost (the usage rows the gate recorded for it)."""
    return store.turn_cost(key, turn)


def search_keys(store: Store, q: str) -> set[str]:
    """Sessions whose key or current messages contain ``q``."""
    return store.search_sessions(q)


def session_costs(store: Store) -> dict[str, float]:
    return store.session_costs()
