"""The reply stage (docs/architecture.md "How a message flows"): a finished turn → the messages to store and
send.  Parse the reply (NO_REPLY, tags, markers; the heartbeat rules for a heartbeat), speak
it when speech is on, check its media against the turn's roots, plan the outbound message,
mark a failed turn's reply, add the HTTP API's part.  Chat, heartbeat and cron share it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

from bot.agent.turn import TurnRequest, TurnResult
from bot.conversation import api as api_turn
from bot.delivery.outbound import build_outbound
from bot.rules.replies import ReplyPlan, parse_reply
from channels.base import Channel, InboundMessage, OutboundMessage

Speak = Callable[[ReplyPlan], Awaitable[ReplyPlan]]
ReplyMode = Literal["off", "first", "all"]


@dataclass(frozen=True)
class ChatReply:
    """The outbound messages of a chat turn (none for a silent reply), and for the HTTP
    API the assistant message as its client receives it."""

    outs: tuple[OutboundMessage, ...]
    api_reply: dict | None = None


def plan_outbound(
    cfg: Any,
    ch: Channel | None,
    plan: ReplyPlan,
    msg: InboundMessage,
    reply_mode: ReplyMode,
    req: TurnRequest,
) -> list[OutboundMessage]:
    """The reply as one outbound message; a guest's media only from its own directory."""
    if plan.silent:
        return []
    roots = [req.file_root] if req.trust == "guest" and req.file_root else None
    return [
        build_outbound(
            cfg,
            ch,
            plan,
            chat_id=msg.chat_id,
            thread_id=msg.thread_id,
            trigger_id=msg.message_id,
            reply_mode=reply_mode,
            account=msg.account,
            roots=roots,
        )
    ]


async def chat_reply(
    cfg: Any,
    ch: Channel | None,
    msg: InboundMessage,
    req: TurnRequest,
    result: TurnResult,
    *,
    reply_mode: ReplyMode,
    api: api_turn.ApiTurn | None = None,
    speak: Speak | None = None,
) -> ChatReply:
    plan = parse_reply(result.text)
    if speak is not None:  # spoken replies
        plan = await speak(plan)
    outs = plan_outbound(cfg, ch, plan, msg, reply_mode, req)
    for o in outs if result.error else ():  # told, marked (the HTTP API answers 502/429)
        o.error = result.error_kind or "model"
    if api is None:
        return ChatReply(tuple(outs))
    # usage, client tool calls, finish reason: one answer, always
    if not outs:
        outs = [OutboundMessage(chat_id=msg.chat_id, account=msg.account)]
    outs[0].api, api_reply = api_turn.answer(result, outs[0].text.strip())
    return ChatReply(tuple(outs), api_reply)


def stopped_reply(msg: InboundMessage, api: api_turn.ApiTurn | None) -> ChatReply:
    """A stopped turn's reply (nothing is delivered for it).  An HTTP API
    caller still waits for its request: it gets an empty assistant message with
    ``finish_reason`` "stop" (no partial text and no error, like every stopped turn; a
    status its SDK retries would run the stopped turn again)."""
    if api is None:
        return ChatReply(())
    out = OutboundMessage(chat_id=msg.chat_id, account=msg.account)
    out.api = {"usage": api_turn.usage_of({}), "tool_calls": [], "finish_reason": "stop"}
    return ChatReply((out,))


def speaker(cfg: Any, agent: Any, req: TurnRequest, turn_id: str) -> Speak | None:
    """Spoken replies when a speech model is set, else None: a guest's audio is
    written in its own directory."""
    if not cfg.media.tts_model:
        return None
    from bot.media import speak_plan

    root = req.file_root if req.trust == "guest" else None

    async def speak(plan: ReplyPlan) -> ReplyPlan:
        return await speak_plan(
            cfg,
            plan,
            file_root=root if root is not None else cfg.agent.workspace,
            out_dir=root / "media" if root is not None else cfg.media_dir / "tts",
            call=agent.gate.bind(req.trust, req.session_key, turn_id),
        )

    return speak


def scheduled_plan(result: TurnResult, *, heartbeat: bool, ack_max_chars: int = 300) -> ReplyPlan:
    """A heartbeat's or cron job's reply (HEARTBEAT_OK and its ack rules for a heartbeat)."""
    if heartbeat:
        return parse_reply(result.text, heartbeat=True, ack_max_chars=ack_max_chars)
    return parse_reply(result.text)


def scheduled_outbound(
    cfg: Any, ch: Channel | None, plan: ReplyPlan, route: dict[str, Any]
) -> OutboundMessage:
    """A scheduled turn's reply, to the route it was resolved to (no reply-to)."""
    return build_outbound(
        cfg,
        ch,
        plan,
        chat_id=route["chat_id"],
        thread_id=route.get("thread_id"),
        account=route.get("account") or "default",
    )
