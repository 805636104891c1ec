"""The owner's last direct chat: the one place that records it and the one place that reads it.

Heartbeats with ``target = "last"`` (the daemon's and ``chela heartbeat``), cron jobs with
``target = "last"`` or a channel id without ``to``, exec approval requests and every other
"reach the owner" path take their route from :func:`last`; only :func:`changes` decides
what is written (owner yes, guest never), and a chat turn stores it in the turn's own
commit.

Recording is owner only: a direct message of an owner turn on a channel that can send on
its own.  Reading checks again, so a stored route that is not the owner's *now* is never
used: one stored by a version that recorded every direct chat, or the chat of someone who
has since been taken off ``allow_from``.  The route's sender must be an owner id of its
channel today (rows without a sender were stored for Telegram/Signal direct chats, whose
chat id is the sender's id); anything else resolves to nothing, and the caller says there
is no owner chat to deliver to rather than picking another one.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping

from bot.rules.admission import NOBODY, channel_policy, is_owner_sender
from bot.config import Config
from bot.config.channels import platform
from bot.store import Store
from channels.base import DEFAULT_ACCOUNT, Channel, InboundMessage, account_key, adapter_for

log = logging.getLogger("chela.owner_route")

KEY = "route:last"
NO_ROUTE = "the owner has not written in a direct chat yet"


def _key(channel: str | None) -> str:
    return KEY if channel is None else f"{KEY}:{channel}"


def changes(msg: InboundMessage, *, trust: str | None, proactive: bool) -> dict:
    """The kv values that record ``msg``'s chat as the owner's last direct chat (overall
    and for its channel), stored with the turn (``Store.commit_turn``'s state); {} when
    ``msg`` is not the owner's direct chat on a channel that can send on its own."""
    if trust != "owner" or msg.chat_type != "direct" or not proactive:
        return {}
    route = {
        "channel": msg.channel,
        "chat_id": msg.chat_id,
        "account": msg.account,
        "thread_id": msg.thread_id,
        "sender_id": msg.sender_id,
        "trust": "owner",
        "at": time.time(),
    }
    # overall, for its channel and for its account (the same key for a default account)
    return dict.fromkeys(
        (KEY, _key(msg.channel), _key(account_key(msg.channel, msg.account))), route
    )


def is_owner_route(route: object, cfg: Config) -> bool:
    """A stored route is the owner's direct chat by today's config."""
    if not isinstance(route, dict) or route.get("trust", "owner") != "owner":
        return False
    channel, chat = str(route.get("channel") or ""), str(route.get("chat_id") or "")
    if not chat or channel_policy(cfg, channel) is None:
        return False  # only messaging channels reach the owner on their own
    sender = str(route.get("sender_id") or chat)
    account = str(route.get("account") or DEFAULT_ACCOUNT)
    probe = InboundMessage(
        channel=channel, chat_id=chat, sender_id=sender, text="", account=account
    )
    return is_owner_sender(probe, cfg)


def last(store: Store, cfg: Config, channel: str | None = None) -> dict | None:
    """The owner's last direct chat (on ``channel`` when given: a channel, or one of its
    accounts as ``telegram:work``), or None when there is none."""
    route = store.get(_key(channel))
    if route is None:
        return None
    if is_owner_route(route, cfg):
        return route
    log.warning(
        "ignoring the stored last route %s:%s: it is not the owner's direct chat "
        "(stored by an older version, or its sender is no longer in allow_from); "
        "it is set again when the owner next writes",
        route.get("channel") if isinstance(route, dict) else "?",
        route.get("chat_id") if isinstance(route, dict) else "?",
    )
    return None


def ask_route(
    store: Store, cfg: Config, channels: Mapping[str, Channel], route: dict, trust: str
) -> dict | None:
    """Where to ask the owner something during a turn (exec approvals): the turn's own chat
    when it is the owner's direct chat on a running channel that can send on its own, else
    the owner's last direct chat (:func:`last`) when its channel account is running; else
    None.  Each account is looked up as itself: never another account's adapter."""
    ch = adapter_for(channels, route.get("channel", ""), route.get("account") or DEFAULT_ACCOUNT)
    if (
        trust == "owner"
        and route.get("chat_type") == "direct"
        and ch is not None
        and ch.capabilities.proactive
    ):
        return route
    found = last(store, cfg)
    if not found:
        return None
    running = adapter_for(
        channels, found.get("channel", ""), found.get("account") or DEFAULT_ACCOUNT
    )
    return found if running is not None else None


def owner_ids(cfg: Config, channel: str, account: str = DEFAULT_ACCOUNT) -> list[str]:
    """The channel account's owner ids in config order: its ``allow_from``, then
    ``owner.numbers`` on a platform whose section says they are ids there (Signal)."""
    pol = channel_policy(cfg, channel, account)
    if pol is None or pol is NOBODY:
        return []
    section = platform(channel)
    numbers = list(cfg.owner.numbers) if section is not None and section.OWNER_NUMBERS else []
    ids = list(pol.allow_from) + numbers
    return [i.strip() for i in ids if i.strip()]


def first_owner(cfg: Config, channel: str, account: str = "default") -> dict | None:
    """The channel's owner route: the direct chat with its first owner id,
    as a route (``channel``, ``chat_id``, ``account``); None when the channel has none.
    How a platform addresses a direct chat by a user id is its section's DIRECT_CHAT."""
    ids = owner_ids(cfg, channel, account or DEFAULT_ACCOUNT)
    if not ids:
        return None
    section = platform(channel)
    chat = (section.DIRECT_CHAT if section is not None else "{}").format(ids[0])
    return {"channel": channel, "chat_id": chat, "account": account or "default"}
