"""Stored messages as the Control UI shows them (SPEC §16.4's message object), and the few
read queries the UI needs that the store's facade does not offer."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from bot.rules.replies import parse_reply
from bot.rules.textproto import split_reasoning
from bot.store import Store

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
    }
    if role == "user":
        if heartbeat or text.lstrip().startswith("<tool_result"):
            return None
        out["text"], seen_channel, out["client_msg_id"] = user_view(text)
        out["channel"] = seen_channel or channel
    elif role == "assistant":
        plan = parse_reply(split_reasoning(text)[0], heartbeat=heartbeat)
        if plan.silent or not plan.text.strip():
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
    row = store.db.execute("SELECT epoch FROM sessions WHERE key=?", (key,)).fetchone()
    if row is None:
        return [], False
    upto = store.db.execute(
        "SELECT COALESCE(MAX(upto_id), 0) FROM summaries WHERE session_key=? AND epoch=?",
        (key, row[0]),
    ).fetchone()[0]
    q = "SELECT id, data, created, kind FROM messages WHERE session_key=? AND epoch=? AND id>?"
    args: list[Any] = [key, row[0], upto]
    if before is not None:
        q += " AND id<?"
        args.append(before)
    q += " ORDER BY id"
    out: list[dict] = []
    has_more = False
    channel = channel_of(key)
    rows = [
        (rid, json.loads(data), created, kind)
        for rid, data, created, kind in store.db.execute(q, args)
    ]
    names = tool_names(r[1] for r in rows)
    for rid, data, created, kind in reversed(rows):
        view = message_view(rid, data, created, channel, kind)
        if view is None:
            continue
        if view["tool"] is not None:
            view["tool"]["name"] = view["tool"]["name"] or names.get(data.get("tool_call_id"), "")
        if len(out) >= limit:
            has_more = True
            break
        out.append(view)
    out.reverse()
    return out, has_more


def answer_of(store: Store, key: str, turn: str) -> dict | None:
    """The assistant message a stored turn ended with."""
    for rid, data, created in store.db.execute(
        "SELECT id, data, created FROM messages WHERE session_key=? AND turn=? AND role='assistant'"
        " ORDER BY id DESC",
        (key, turn),
    ):
        view = message_view(rid, json.loads(data), created, "web")
        if view is not None:
            return view
    return None


def turn_cost(store: Store, key: str, turn: str) -> float:
    """What a turn's model calls cost (the usage rows the gate recorded for it)."""
    row = store.db.execute(
        "SELECT COALESCE(SUM(cost_usd), 0) FROM usage WHERE session_key=? AND turn=?", (key, turn)
    ).fetchone()
    return float(row[0] or 0.0)


def search_keys(store: Store, q: str) -> set[str]:
    """Sessions whose key or current messages contain ``q``."""
    like = "%" + q.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
    rows = store.db.execute(
        "SELECT s.key FROM sessions s WHERE s.key LIKE ? ESCAPE '\\' OR EXISTS (SELECT 1 FROM"
        " messages m WHERE m.session_key=s.key AND m.epoch=s.epoch AND m.data LIKE ? ESCAPE '\\')",
        (like, like),
    )
    return {r[0] for r in rows}


def session_costs(store: Store) -> dict[str, float]:
    return {
        k: float(c or 0.0)
        for k, c in store.db.execute("SELECT session_key, SUM(cost_usd) FROM usage GROUP BY 1")
    }
