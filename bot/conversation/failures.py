"""What a failed turn sends (docs/architecture.md "failures"): the apology, the same for every
failure, never depending on the store (the outbox sends it from memory if it must)."""

from __future__ import annotations

from channels.base import InboundMessage, OutboundMessage

APOLOGY = "Sorry, something went wrong on my side. Please try again."


def apology(msg: InboundMessage) -> OutboundMessage:
    return OutboundMessage(
        chat_id=msg.chat_id, thread_id=msg.thread_id, text=APOLOGY, account=msg.account
    )
