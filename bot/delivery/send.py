"""One message out through the outbox, for every sender that is not a chat turn's commit:
the ``message`` tool, exec approval requests, pairing notes, apologies, and the rows a
scheduled turn stored with its turn.

Each is a row in the outbox (stored, ordered per chat, retried, recovered after a crash);
these helpers store and queue it, then wait for its first attempt only, so a platform
outage never holds up the caller past one try.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from bot.config import Config, channel_accounts
from bot.config.channels import MESSAGING
from bot.delivery.outbox import Outbox
from bot.rules.routing import accounts_of_agent
from bot.store import OutboxRow
from channels.base import OutboundMessage, account_key, split_account_key

# (route, text) -> True unless the platform refused it for good
Notify = Callable[[dict, str], Awaitable[bool]]
# (channel or channel:account, to, text) -> what the ``message`` tool tells the model
SendMessage = Callable[[str, str, str], Awaitable[str]]


async def deliver(
    outbox: Outbox, channel: str, out: OutboundMessage, *, kind: str, agent: str = ""
) -> str:
    """Store and send one message: 'sent', 'queued' (the platform did not take it yet; retried
    up to ``delivery.max_age``) or 'failed' (refused for good).  ``agent``: the agent it is
    sent for, stored on its row ("" for the daemon's own notices)."""
    item = outbox.submit(channel, out, kind=kind, agent=agent)
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


def foreign_accounts(cfg: Config, agent_id: str) -> frozenset[tuple[str, str]]:
    """The enabled ``(channel, account)`` pairs agent ``agent_id`` may not send through: the
    ones no binding gives it (accounts no binding names belong to the default agent).
    ``cfg`` is the daemon's whole config (its ``agent.id`` is the default agent's)."""
    enabled = {(name, acct) for name in MESSAGING for acct in channel_accounts(cfg, name)}
    return frozenset(enabled - accounts_of_agent(cfg, agent_id))


def message_tool(outbox: Outbox, cfg: Config | None = None, agent_id: str = "") -> SendMessage:
    """The ``message`` tool's way out for agent ``agent_id``: to a running channel account,
    through the outbox; an account bound only to other agents is refused (``cfg``: the
    daemon's whole config; None refuses nothing, for a daemon of one agent built by hand)."""
    refused: frozenset[tuple[str, str]] = frozenset()
    mine = "none"
    if cfg is not None:
        agent_id = agent_id or cfg.agent.id
        refused = foreign_accounts(cfg, agent_id)
        own = sorted(account_key(c, a) for c, a in accounts_of_agent(cfg, agent_id))
        mine = ", ".join(own) or "none"

    async def send(channel: str, to: str, text: str) -> str:
        """``channel`` names an account as ``telegram:work`` (``telegram``: its default)."""
        running = outbox.channels
        name, account = split_account_key(channel)
        if (name, account) in refused:
            return (
                f"Error: {name}:{account} is not an account of agent {agent_id!r}: its "
                f"messages go only through its own accounts ({mine})"
            )
        if account_key(name, account) not in running:
            names = ", ".join(running) or "none"
            return f"Error: channel {channel!r} is not running (running: {names})"
        out = OutboundMessage(chat_id=to, text=text, account=account)
        status = await deliver(outbox, name, out, kind="message", agent=agent_id)
        if status == "queued":
            return (
                f"queued: {channel} did not accept it yet; it is stored and retried until "
                "delivered (or given up after delivery.max_age)"
            )
        return "sent" if status == "sent" else "Error: the message could not be delivered"

    return send
