"""The dispatch stage (docs/architecture.md "How a message flows"): an admitted message → what happens to it.

``Skipped`` (its sender is not served), a ``CommandCall`` (a chat command of the table),
``HistoryOnly`` (a group message not addressed to the agent) or a ``TurnCall``.  "Addressed"
is decided once, here, through the ``addressed`` port (``gating`` on the session's
activation); the command parser is a port too (the table lives beside this stage)."""

from __future__ import annotations

from collections.abc import Callable

from bot.conversation.types import (
    Accepted,
    CommandCall,
    Dispatched,
    HistoryOnly,
    Skipped,
    TurnCall,
)


def dispatch(
    acc: Accepted,
    *,
    command: Callable[[], CommandCall | None],
    addressed: Callable[[], bool],
) -> Dispatched:
    msg, key, verdict = acc.msg, acc.key, acc.verdict
    if not verdict.served:
        return Skipped(verdict.reason, msg.channel, key)
    call = command()
    if call is not None:
        return call
    if msg.chat_type == "group" and not addressed():
        return HistoryOnly(msg, key)
    return TurnCall(msg, key, verdict, acc.agent)
