"""Turns of the OpenAI-compatible HTTP API: which of a client's messages are
new, what they become for the model, and what the answer tells the client.

An OpenAI client sends the whole conversation with every request.  The HTTP adapter
validates it into ``InboundMessage.api`` (plain data, see ``channels/http/parse.py``):

    {"instructions": str, "messages": [...], "tools": [...], "tool_choice": ...,
     "params": {...}, "stateless": bool}

where each message is ``{"role": "user", "content": str, "images": [digest, ...]}``,
``{"role": "assistant", "content": str, "tool_calls": [...]}`` or
``{"role": "tool", "tool_call_id": str, "content": str}`` (system and developer messages
are already folded into ``instructions``).

Without ``user`` the request is stateless: a throw-away session whose history is the
client's earlier messages.  With ``user`` the session ``agent:<id>:http:<user>`` lives on
the server, and only the messages it has not seen are appended.  How "seen" is decided:
the server keeps, per session, a digest of every message the client has seen (the ones
it sent and the answers it got, in order).  The new messages are what follows the longest
run of the client's messages that ends exactly where the server's record ends (a client
that sends the whole conversation, a sliding window of it, or only the new message all
work).  When nothing lines up but the client's first message is one the server has seen,
the client edited or regenerated an earlier message: the conversation forked, so the
session starts afresh (a new epoch, as ``/new``) from the client's messages.
"""

from __future__ import annotations

import hashlib
from typing import Any

from bot.conversation.types import ApiTurn

SEEN_MAX = 1000  # digests kept per session (the record of what the client has seen)
NO_RESULT = "Error: the client sent no result for this tool call."


def state_key(session_key: str) -> str:
    """The store key (``Store.get``/``put``) of a session's record."""
    return f"api:{session_key}"


def digest(m: dict) -> str:
    """A message as the client sees it, reduced to what identifies it: role, text (ends
    trimmed), image digests, tool-call ids and the answered call id."""
    role = str(m.get("role", ""))
    parts = [role, str(m.get("content") or "").strip()]
    if role == "user":
        parts += [str(i) for i in m.get("images") or ()]
    elif role == "assistant":
        parts += [str(c.get("id", "")) for c in m.get("tool_calls") or ()]
    elif role == "tool":
        parts.append(str(m.get("tool_call_id", "")))
    return hashlib.sha256("\x00".join(parts).encode("utf-8", "replace")).hexdigest()[:20]


def seen_count(client: list[str], seen: list[str]) -> int:
    """How many of the client's leading messages the server has seen: the largest ``m <
    len(client)`` such that the client's messages before ``m`` end with the server's
    record (as much of it as they cover).  0 when none line up."""
    if not seen:
        return 0
    for m in range(len(client) - 1, 0, -1):
        n = min(m, len(seen))
        if client[m - n : m] == seen[-n:]:
            return m
    return 0


def model_message(m: dict) -> dict:
    """A validated client message as a model message."""
    role = m["role"]
    text = str(m.get("content") or "")
    if role == "user":
        n = len(m.get("images") or ())
        if n:  # an earlier message's images are not sent again (the current one's are)
            note = "[an image]" if n == 1 else f"[{n} images]"
            text = f"{text}\n{note}" if text else note
        return {"role": "user", "content": text}
    if role == "assistant":
        out: dict[str, Any] = {"role": "assistant", "content": text or None}
        if m.get("tool_calls"):
            out["tool_calls"] = [
                {"id": c["id"], "type": "function", "function": dict(c["function"])}
                for c in m["tool_calls"]
            ]
        else:
            out["content"] = text
        return out
    return {"role": "tool", "tool_call_id": m["tool_call_id"], "content": text}


def _close_calls(msgs: list[dict], open_ids: list[str]) -> list[dict]:
    """Model messages in which every tool call is answered before the next non-tool
    message (providers refuse a request otherwise): a call the client never answered
    gets ``NO_RESULT``."""
    out: list[dict] = []
    pending = list(open_ids)

    def flush() -> None:
        for cid in pending:
            out.append({"role": "tool", "tool_call_id": cid, "content": NO_RESULT})
        pending.clear()

    for m in msgs:
        if m["role"] == "tool":
            if m["tool_call_id"] in pending:
                pending.remove(m["tool_call_id"])
            out.append(m)
            continue
        flush()
        out.append(m)
        pending = [c["id"] for c in m.get("tool_calls") or ()]
    flush()
    return out


def plan(
    api: dict,
    state: dict | None,
    *,
    epoch: int,
    own_tools: set[str],
    native_tools: bool,
) -> ApiTurn:
    """The turn of one request.  ``state`` is the session's record (``state_key``), None
    for a stateless request; ``epoch`` the session's current epoch."""
    msgs: list[dict] = list(api.get("messages") or [])
    tools = list(api.get("tools") or [])
    clash = sorted({t["function"]["name"] for t in tools} & own_tools)
    if clash:
        return ApiTurn(
            error=f"the tool name {clash[0]!r} is one of the assistant's own tools; "
            "rename the client tool"
        )
    if tools and not native_tools:
        return ApiTurn(error="client tools need native tool calling (agent.native_tools = true)")
    if not msgs or msgs[-1]["role"] not in ("user", "tool"):
        return ApiTurn(error="messages must end with a user message or with tool results")
    stateful = not api.get("stateless")
    seen: list[str] = []
    pending: list[str] = []
    if stateful and state and state.get("epoch") == epoch:
        seen = list(state.get("seen") or [])
        pending = list(state.get("pending") or [])
    client = [digest(m) for m in msgs]
    m = seen_count(client, seen)
    fork = False
    if m == 0 and len(msgs) > 1 and seen and client[0] in set(seen):
        fork, seen, pending = True, [], []
    new = msgs[m:]
    # every tool result must answer a call the client was given
    asked = set(pending)
    for msg in msgs:
        if msg["role"] == "assistant":
            asked.update(c["id"] for c in msg.get("tool_calls") or ())
        elif msg["role"] == "tool" and msg["tool_call_id"] not in asked:
            return ApiTurn(
                error=f"a tool message answers tool_call_id {msg['tool_call_id']!r}, "
                "which no assistant message asked for"
            )
    user_turn = new[-1]["role"] == "user"
    before = new[:-1] if user_turn else new
    prior = _close_calls([model_message(x) for x in before], pending)
    return ApiTurn(
        prior=prior,
        user_turn=user_turn,
        instructions=str(api.get("instructions") or ""),
        tools=tools,
        params=dict(api.get("params") or {}),
        fork=fork,
        seen=seen + client[m:],
        stateful=stateful,
    )


def state_values(
    turn: ApiTurn | None, reply: dict | None, epoch: int, key: str
) -> dict[str, Any] | None:
    """What the client has seen, as the store values kept with the turn (a stateful API
    session only; None otherwise)."""
    if turn is None or not turn.stateful:
        return None
    return {state_key(key): remember(turn, reply, epoch)}


def remember(turn: ApiTurn, reply: dict | None, epoch: int) -> dict:
    """The session's record after the request: its messages and the answer the client
    got (``reply``: the assistant message as sent; None when the turn failed)."""
    seen = list(turn.seen)
    pending: list[str] = []
    if reply is not None:
        seen.append(digest(reply))
        pending = [c["id"] for c in reply.get("tool_calls") or ()]
    return {"epoch": epoch, "seen": seen[-SEEN_MAX:], "pending": pending}


def usage_of(usage: dict) -> dict[str, Any]:
    """The turn's token counts (every model call of it) in OpenAI's ``usage`` shape."""
    p = int(usage.get("prompt_tokens", 0) or 0)
    c = int(usage.get("completion_tokens", 0) or 0)
    out: dict[str, Any] = {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}
    cached = int(usage.get("cached_tokens", 0) or 0)
    if cached:
        out["prompt_tokens_details"] = {"cached_tokens": cached}
    return out


def answer(result: Any, text: str) -> tuple[dict[str, Any], dict | None]:
    """The API part of the reply to a finished turn (``OutboundMessage.api``) and the
    assistant message as the client receives it (None when the turn failed)."""
    api = {
        "usage": usage_of(result.usage or {}),
        "tool_calls": list(result.client_calls or ()),
        "finish_reason": result.finish_reason or "stop",
    }
    if result.error:
        return api, None
    reply: dict[str, Any] = {"role": "assistant", "content": text}
    if result.client_calls:
        reply["tool_calls"] = result.client_calls
    return api, reply
