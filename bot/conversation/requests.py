"""THE ``TurnRequest`` builder (docs/architecture.md "one way to do a thing"): chat turns,
command turns (``/compact``), HTTP API turns and scheduled turns (heartbeat, cron) are all
built here, from plain values the caller looked up (the channel's traits, the group
context), so the builder reads nothing itself."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Mapping
from typing import Any

from bot.delivery.outbound import channel_traits
from bot.rules.admission import Trust, channel_policy
from bot.agent.turn import TurnRequest
from bot.conversation.types import ApiTurn
from channels.base import Channel, InboundMessage, adapter_for


@dataclass(frozen=True)
class Traits:
    """What the channel of the turn can do, for the prompt: ``channel_traits``."""

    capabilities: tuple[str, ...] = ()
    reactions: str = "off"


@dataclass(frozen=True)
class ChatContext:
    """What a chat turn adds besides its text: the group's context block, the delivery
    instructions after the user message, the turn's trust and file root, the media."""

    trust: Trust = "guest"
    file_root: Path | None = None
    extra_context: str = ""
    after_user_system: str = ""
    media: tuple[dict, ...] = field(default_factory=tuple)


def route_of(msg: InboundMessage, agent: str = "") -> dict[str, Any]:
    """Where a chat turn of ``agent`` came from (its tools reply there; a cron job its turn
    adds runs as that agent)."""
    return {
        "agent": agent,
        "channel": msg.channel,
        "chat_id": msg.chat_id,
        "account": msg.account,
        "thread_id": msg.thread_id,
        "chat_type": msg.chat_type,
    }


def chat_request(
    msg: InboundMessage,
    key: str,
    user_text: str,
    traits: Traits,
    ctx: ChatContext,
    api: ApiTurn | None = None,
    *,
    agent: str,
) -> TurnRequest:
    """A turn of ``agent`` answering ``msg`` (a chat message, a command's turn, an HTTP API
    call)."""
    group = msg.chat_type == "group"
    req = TurnRequest(
        session_key=key,
        user_text=user_text,
        agent=agent,
        channel=msg.channel,
        account=msg.account,
        chat_type=msg.chat_type,
        group_id=msg.chat_id if group else "",
        group_title=msg.chat_title if group else "",
        extra_context=ctx.extra_context,
        capabilities=traits.capabilities,
        reactions=traits.reactions,
        after_user_system=ctx.after_user_system,
        route=route_of(msg, agent),
        message_text=msg.text,
        trust=ctx.trust,
        file_root=ctx.file_root,
        media=list(ctx.media),
    )
    if api is not None:  # the client's part of the turn
        req.client_instructions = api.instructions
        req.prior = api.prior
        req.user_turn = api.user_turn
        req.client_tools = api.tools
        req.params = api.params
        if not api.user_turn:
            req.media = []
    return req


def route_traits(cfg: Any, channels: Mapping[str, Channel], route: dict[str, Any] | None) -> Traits:
    """The traits of the channel a heartbeat, cron or event turn replies on (none: no route)."""
    if not route:
        return Traits()
    ch = adapter_for(channels, route["channel"], route.get("account") or "default")
    return Traits(*channel_traits(ch, channel_policy(cfg, route["channel"])))


def scheduled_request(
    key: str,
    text: str,
    *,
    kind: str,
    session_kind: str,
    route: dict[str, Any] | None,
    traits: Traits,
    agent: str,
) -> TurnRequest:
    """A heartbeat or cron turn of ``agent``; ``route``: where its reply goes (None:
    nowhere)."""
    return TurnRequest(
        session_key=key,
        user_text=text,
        agent=agent,
        kind=kind,
        session_kind=session_kind,
        channel=route["channel"] if route else "",
        account=route.get("account", "") if route else "",
        chat_type="direct" if route else "",
        capabilities=traits.capabilities,
        reactions=traits.reactions,
        route=route or {},
        message_text=text,
    )
