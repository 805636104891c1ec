"""What a reply becomes on its way out: one ``OutboundMessage`` per reply plan, and what the
prompt is told about a channel.  Chat turns and scheduled turns (heartbeat, cron) both build
their outbound messages here, so a reply is threaded, its media checked and carried (or
named in text) the same way whoever produced it.

``cfg`` is the daemon's ``bot.config.Config`` and ``policy`` a channel's ``ChannelPolicy``;
neither is imported here while the config package still reaches the conversation (through
``channel_specs``): this module would join that import cycle.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from bot import fs
from channels.base import Channel, OutboundMessage


def channel_traits(ch: Channel | None, policy: Any) -> tuple[tuple[str, ...], str]:
    """What the prompt needs to know about a channel (its running adapter and its config
    policy): capability names and reactions mode."""
    return (tuple(ch.capabilities.names()) if ch else ()), (policy.reactions if policy else "off")


def build_outbound(
    cfg: Any,
    ch: Channel | None,
    plan,
    *,
    chat_id: str,
    thread_id: str | None = None,
    trigger_id: str = "",
    reply_mode: Literal["off", "first", "all"] = "off",
    account: str = "default",
    roots: list[Path] | None = None,
) -> OutboundMessage:
    """A reply plan → one OutboundMessage: reply threading resolved, local media checked
    against ``roots`` (default: the owner's workspace, the media dir and the browser's
    screenshots; a guest turn passes its own directory), and media the channel cannot carry
    turned into text."""
    from bot.delivery.attachments import resolve_media

    stage = None
    if roots is not None:  # a guest's directory: send a private copy of what was checked
        stage = cfg.agent.state_dir / "outgoing"
        fs.prune_older_than(stage, cfg.delivery.max_age_seconds / 86400 + 1)
    owner_roots = [cfg.agent.workspace, cfg.media_dir, cfg.agent.state_dir / "browser" / "shots"]
    media, notes = resolve_media(plan.media, roots if roots is not None else owner_roots, stage)
    text = plan.text
    if notes:
        text = "\n".join([text, *notes]).strip()
    if ch is not None and not ch.capabilities.media and media:
        links = [
            f"{m.kind.title()}: {m.target}" if m.is_url else f"[attachment: {m.name or m.target}]"
            for m in media
        ]
        text = "\n".join([text, *links]).strip()
        media = []
    reply_to = None
    if plan.reply_to == "current":
        reply_to = trigger_id or None
    elif plan.reply_to:
        reply_to = plan.reply_to
    elif reply_mode in ("first", "all") and trigger_id:
        reply_to = trigger_id
    return OutboundMessage(
        chat_id=chat_id,
        text=text,
        thread_id=thread_id,
        reply_to_id=reply_to,
        reply_mode=reply_mode if reply_mode != "off" else "first",
        media=media,
        audio_as_voice=plan.audio_as_voice,
        account=account,
    )
