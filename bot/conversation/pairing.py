"""The pairing flow (ARCHITECTURE.md move 6, SPEC §9): a stranger's direct message is held
and answered with a pairing code; the owner's approval (``chela pairing approve``) lets the
held message through.  The codes and their limits are ``bot.pairing``."""

from __future__ import annotations

import contextlib
import logging

from bot import pairing
from bot.delivery import send
from bot.delivery.outbox import Outbox
from bot.store import Store
from channels.base import InboundMessage, OutboundMessage

log = logging.getLogger("chela.router")


async def reply(store: Store, outbox: Outbox, msg: InboundMessage) -> None:
    """Answer a stranger's first message with a pairing code (at most one reply an hour),
    and log how the owner admits them."""
    text = pairing.request_pairing(store, msg.channel, msg.sender_id, msg.sender_name)
    code = next(
        (r["code"] for r in store.pairing_requests(msg.channel) if r["sender_id"] == msg.sender_id),
        "?",
    )
    log.info(
        "pairing requested channel=%s sender=%s code=%s replied=%s; to admit them run: chela pairing approve %s %s",
        msg.channel,
        msg.sender_id,
        code,
        bool(text),
        msg.channel,
        code,
    )
    if text:
        with contextlib.suppress(Exception):
            await send.deliver(
                outbox,
                msg.channel,
                OutboundMessage(chat_id=msg.chat_id, text=text, account=msg.account),
                kind="pairing",
            )
