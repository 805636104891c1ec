"""Which agent answers a message, from the ``[[bindings]]`` of the config.  Pure.

The most specific binding that matches wins: chat + peer, then chat, then peer, then account,
then channel only (``Binding.rank``).  A binding that names an account matches only messages
of that account.  No binding matches: the default agent.  Two bindings that could tie are
refused when the config is loaded (bot/config/bindings.py), so the winner is never the first
one written.

On Telegram a direct chat's id is the sender's id: ``chat = X`` and ``peer = X`` both match a
DM from X, and the ranks decide between them.
"""

from __future__ import annotations

from collections.abc import Iterable

from bot.config import Binding, Config, channel_accounts
from bot.config.channels import MESSAGING


def matches(b: Binding, channel: str, account: str, chat: str, peer: str) -> bool:
    """``b`` covers a message of ``account`` on ``channel`` in ``chat`` from ``peer``."""
    return (
        b.channel == channel
        and b.account in ("", account)
        and b.chat in ("", chat)
        and b.peer in ("", peer)
    )


def route(
    bindings: Iterable[Binding],
    default_agent: str,
    channel: str,
    account: str,
    chat: str,
    peer: str,
) -> str:
    """The id of the agent that answers this message.  ValueError when two bindings of the
    same rank match (the loader refuses such a config; never "first wins")."""
    best: Binding | None = None
    for b in bindings:
        if not matches(b, channel, account, chat, peer):
            continue
        if best is not None and b.rank == best.rank:
            raise ValueError(f"two bindings tie for {channel}:{account} {chat}/{peer}")
        if best is None or b.rank > best.rank:
            best = b
    return best.agent if best is not None else default_agent


def agents_for_account(
    bindings: Iterable[Binding], default_agent: str, channel: str, account: str
) -> set[str]:
    """Every agent that can answer a message of ``account`` on ``channel``: each agent a
    binding for it names, and the default agent unless a binding takes the whole account
    (one naming neither chat nor peer)."""
    mine = [b for b in bindings if b.channel == channel and b.account in ("", account)]
    agents = {b.agent for b in mine}
    if not any(not b.chat and not b.peer for b in mine):
        agents.add(default_agent)
    return agents


def accounts_of_agent(cfg: Config, agent_id: str) -> set[tuple[str, str]]:
    """The enabled ``(channel, account)`` pairs agent ``agent_id`` may send through (the
    ``message`` tool, heartbeat and cron ``last`` routes): those whose messages it can answer."""
    return {
        (channel, account)
        for channel in MESSAGING
        for account in channel_accounts(cfg, channel)
        if agent_id in agents_for_account(cfg.bindings, cfg.agent.id, channel, account)
    }
