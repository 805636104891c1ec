"""The pairing flow (docs/architecture.md "How a message flows"): a stranger's direct message is
held and answered with a pairing code; the owner is told once per request, on the
channel's owner route; the owner's approval (``/pair approve``, ``chela pairing approve``
or the Control UI) lets the held message through.  The codes and their limits are
``bot.conversation.pairing_requests``."""

from __future__ import annotations

import logging

from bot.conversation import owner_route
from bot.conversation import pairing_requests as pairing
from bot.config import Config
from bot.delivery import send
from bot.delivery.outbox import Outbox
from bot.rules.admission import session_key
from bot.rules.untrusted import clean_inline, quoted
from bot.store import InboundRow, Store
from channels.base import (
    DEFAULT_ACCOUNT,
    InboundMessage,
    OutboundMessage,
    account_key,
    split_account_key,
)
from channels.best_effort import best_effort

log = logging.getLogger("chela.conversation")

FIRST_MESSAGE_CHARS = 200  # of the stranger's message, in the owner's notice


def owner_notice(msg: InboundMessage, code: str) -> str:
    """What the owner is told of a new request.  The sender's name and message are theirs
    : one line each, quoted, capped, so they cannot pose as our own lines."""
    name = quoted(msg.sender_name or msg.sender_username or "", 80)
    first = quoted(msg.text or "", FIRST_MESSAGE_CHARS)
    return (
        f"Pairing request on {account_key(msg.channel, msg.account)} from {name} "
        f"(id {clean_inline(msg.sender_id, 80)})\n"
        f"Their message: {first}\n"
        f"Code: {code}\n"
        f"To admit them as a guest: /pair approve {code}\n"
        f"To refuse: /pair deny {code}"
    )


def held_message(store: Store, cfg: Config, where: str, sender_id: str) -> InboundRow | None:
    """The newest message a sender approved on account ``where`` (``telegram:work``) left
    waiting there (``Conversation.on_inbound`` keeps only the newest); None when none."""
    channel, account = split_account_key(where)
    probe = InboundMessage(
        channel=channel, chat_id=sender_id, sender_id=sender_id, text="", account=account
    )
    key = session_key(probe, cfg, "guest")
    held = store.inbound_with_status("pairing", session_key=key)
    mine = [r for r in held if r.payload.get("account", DEFAULT_ACCOUNT) == account]
    return mine[-1] if mine else None


async def _tell_owner(cfg: Config, outbox: Outbox, msg: InboundMessage, code: str) -> None:
    # the owner of the account the request was made on, told through that account
    route = owner_route.first_owner(cfg, msg.channel, msg.account)
    if route is None:
        log.info(
            "pairing request channel=%s sender=%s code=%s: the channel has no owner route "
            "(allow_from is empty); only this log line tells the owner",
            account_key(msg.channel, msg.account),
            msg.sender_id,
            code,
        )
        return
    with best_effort(log, "telling the owner about a pairing request", level=logging.WARNING):
        await send.deliver(
            outbox,
            msg.channel,
            send.to_route(route, owner_notice(msg, code)),
            kind="pairing",
        )


async def reply(
    store: Store,
    outbox: Outbox,
    msg: InboundMessage,
    cfg: Config | None = None,
    *,
    notices: pairing.NoticesPort | None = None,
) -> None:
    """Answer a stranger's message with a pairing code (at most one reply an hour); on a
    new request tell the owner once (``cfg`` given) and publish ``pairing.pending``.  The
    request belongs to the account the message came in on (``telegram:work``), and the
    code and the owner's notice leave through that account."""
    where = account_key(msg.channel, msg.account)
    made = pairing.request(
        store, where, msg.sender_id, msg.sender_name, clean_inline(msg.text or "", 2000)
    )
    log.info(
        "pairing requested channel=%s sender=%s code=%s replied=%s; to admit them run: chela pairing approve %s %s",
        where,
        msg.sender_id,
        made.code,
        bool(made.reply),
        where,
        made.code,
    )
    if made.reply:
        with best_effort(log, "sending a pairing code", level=logging.WARNING):
            await send.deliver(
                outbox,
                msg.channel,
                OutboundMessage(chat_id=msg.chat_id, text=made.reply, account=msg.account),
                kind="pairing",
            )
    if made.fresh_code and notices is not None:  # the Control UI shows the current code
        row = next((r for r in pairing.pending(store) if r["code"] == made.code), None)
        if row is not None:
            notices.publish("pairing.pending", row)
    if made.new and cfg is not None:  # once per request, never for its hourly repeat
        await _tell_owner(cfg, outbox, msg, made.code)
