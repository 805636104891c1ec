"""The frozen values the conversation stages hand to each other (ARCHITECTURE.md)."""

from __future__ import annotations

from dataclasses import dataclass

from bot.admission import Verdict
from channels.base import InboundMessage


@dataclass(frozen=True)
class CommandCall:
    """A chat command to answer (SPEC §4.4): ``/name@bot args`` from an admitted message.

    ``owner``: the *sender* is the owner on this channel (by id, ``is_owner_sender``), which
    is what owner-only commands ask, whatever the trust of the turn.  ``on_arrival``: answered
    as the message arrives (an immediate command), not from the session lane later (after a
    restart, say), when a wait it answered may be gone."""

    name: str
    args: str
    msg: InboundMessage
    key: str  # the session key
    verdict: Verdict
    owner: bool
    on_arrival: bool = False


@dataclass(frozen=True)
class Replies:
    """The texts to store with the message and deliver, in order."""

    texts: tuple[str, ...] = ()

    @classmethod
    def one(cls, text: str) -> Replies:
        return cls((text,))
