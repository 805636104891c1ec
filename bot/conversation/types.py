"""The frozen values the conversation stages hand to each other (docs/architecture.md)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bot.rules.admission import Verdict
from bot.agent.turn import TurnResult
from bot.delivery.previews import Preview, StreamText
from channels.base import InboundMessage


@dataclass(frozen=True)
class CommandCall:
    """A chat command to answer: ``/name@bot args`` from an admitted message.

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


@dataclass(frozen=True)
class TurnOutcome:
    """What the run stage hands on: the agent's result (``None`` when the turn was
    stopped), the live output still to settle with the reply, and the turn's event id."""

    result: TurnResult | None
    live: Preview | StreamText | None
    turn: str

    @property
    def stopped(self) -> bool:
        return self.result is None


@dataclass
class ApiTurn:
    """What one HTTP API request does to its session (``conversation.api``
    plans it, the request builder carries it into the turn)."""

    error: str = ""  # the request cannot run: answered 400 with this message
    prior: list[dict] = field(default_factory=list)  # model messages before the user turn
    user_turn: bool = True  # False: ``prior`` ends with client tool results
    instructions: str = ""
    tools: list[dict] = field(default_factory=list)
    params: dict[str, Any] = field(default_factory=dict)
    fork: bool = False  # the client rewrote history: start the session afresh
    seen: list[str] = field(default_factory=list)  # the record once these messages count
    stateful: bool = False


@dataclass(frozen=True)
class UserTurn:
    """The prepare stage's output: the user turn's text for the model (metadata block,
    transcripts, document bodies) and the image references stored with it."""

    text: str
    media: tuple[dict, ...] = ()


@dataclass(frozen=True)
class Skipped:
    """An admitted-then-refused message (a recovered one whose sender is no longer served)."""

    reason: str
    channel: str = ""
    key: str = ""


@dataclass(frozen=True)
class HistoryOnly:
    """A group message not addressed to the agent: it joins the group's pending history."""

    msg: InboundMessage
    key: str


@dataclass(frozen=True)
class Accepted:
    """An admitted, stored message: its session and the agent that answers it.  The agent is
    chosen once, at intake (its binding, or an HTTP API ``chela/<id>`` model), stored with
    the inbound row, and carried from here to the commit: never taken from the session key."""

    msg: InboundMessage
    key: str
    verdict: Verdict
    agent: str


@dataclass(frozen=True)
class TurnCall:
    """A message the model answers (``agent``: the agent chosen at intake)."""

    msg: InboundMessage
    key: str
    verdict: Verdict
    agent: str


Dispatched = CommandCall | HistoryOnly | TurnCall | Skipped
