"""The dispatch stage (docs/architecture.md "How a message flows"): an admitted message → what happens to it.

``Skipped`` (its sender is not served), a ``CommandCall`` (a chat command of the table),
``HistoryOnly`` (a group message not addressed to the agent) or a ``TurnCall``.  "Addressed"
is decided once, here, through the ``addressed`` port (``gating`` on the session's
activation); the command parser is a port too (the table lives beside this stage)."""

from __future__ import annotations

from collections.abc import Callable

from bot.rules.admission import Verdict
from bot.conversation.types import CommandCall, Dispatched, HistoryOnly, Skipped, TurnCall
from channels.base import InboundMessage


def dispatch(
    msg: InboundMessage,
    key: str,
    verdict: Verdict,
    *,
    command: Callable[[], CommandCall | None],
    addressed: Callable[[], bool],
) -> Dispatched:
    if not verdict.served:
        return Skipped(verdict.reason, msg.channel, key)
    call = command()
    if call is not None:
        return call
    if msg.chat_type == "group" and not addressed():
        return HistoryOnly(msg, key)
    return TurnCall(msg, key, verdict)
