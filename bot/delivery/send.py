"""One message out through the outbox, for every sender that is not a chat turn's commit:
the ``message`` tool, exec approval requests, pairing notes, apologies, and the rows a
scheduled turn stored with its turn.

Each is a row in the outbox (stored, ordered per chat, retried, recovered after a crash);
these helpers store and queue it, then wait for its first attempt only, so a platform
outage never holds up the caller past one try.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from bot.delivery.outbox import Outbox
from bot.store import OutboxRow
from channels.base import OutboundMessage

# (route, text) -> True unless the platform refused it for good
Notify = Callable[[dict, str], Awaitable[bool]]
# (channel, to, text) -> what the ``message`` tool tells the model
SendMessage = Callable[[str, str, str], Awaitable[str]]


async def deliver(outbox: Outbox, channel: str, out: OutboundMessage, *, kind: str) -> str:
    """Store and send one message: 'sent', 'queued' (the platform did not take it yet; retried
    up to ``delivery.max_age``) or 'failed' (refused for good)."""
    item = outbox.submit(channel, out, kind=kind)
    return (await outbox.first_attempt([item]))[0]


async def deliver_stored(outbox: Outbox, ids: list[int]) -> list[str]:
    """Hand rows already stored (with their turn, ``Store.commit_turn``) to the outbox and
    wait for their first attempt; a retry does not hold up the caller."""
    if not ids:
        return []
    return await outbox.first_attempt(outbox.enqueue(ids))


async def deliver_rows(outbox: Outbox, rows: list[OutboxRow]) -> list[str]:
    """``deliver_stored`` of rows the caller holds as stored (``Store.commit_turn_rows``,
    written in the turn's commit): queued without reading them back."""
    if not rows:
        return []
    return await outbox.first_attempt(outbox.enqueue_rows(rows))


def to_route(route: dict, text: str) -> OutboundMessage:
    """A message to a stored route (``channel``, ``chat_id``, ``account``, ``thread_id``)."""
    return OutboundMessage(
        chat_id=route["chat_id"],
        text=text,
        account=route.get("account") or "default",
        thread_id=route.get("thread_id"),
    )


def notifier(outbox: Outbox, *, kind: str) -> Notify:
    """A port that sends ``text`` to a route (exec approvals ask the owner with it)."""

    async def notify(route: dict, text: str) -> bool:
        return await deliver(outbox, route["channel"], to_route(route, text), kind=kind) != "failed"

    return notify


def message_tool(outbox: Outbox) -> SendMessage:
    """The ``message`` tool's way out: to a running channel, through the outbox."""

    async def send(channel: str, to: str, text: str) -> str:
        running = outbox.channels
        if channel not in running:
            names = ", ".join(running) or "none"
            return f"Error: channel {channel!r} is not running (running: {names})"
        status = await deliver(
            outbox, channel, OutboundMessage(chat_id=to, text=text), kind="message"
        )
        if status == "queued":
            return (
                f"queued: {channel} did not accept it yet; it is stored and retried until "
                "delivered (or given up after delivery.max_age)"
            )
        return "sent" if status == "sent" else "Error: the message could not be delivered"

    return send
