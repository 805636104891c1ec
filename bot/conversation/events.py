"""Turn progress as events (docs/architecture.md "How a message flows").

The run stage publishes what a turn does while it runs: started, text as it arrives, tool
calls started and finished, and how it ended (final, error or cancelled).  The Control UI,
the HTTP stream and the terminal chat subscribe; nothing in the turn waits for them.  A
subscriber that falls behind loses its oldest events, never blocks the turn."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Literal

log = logging.getLogger("chela.events")

EventKind = Literal[
    "started", "text", "step", "tool_start", "tool_end", "final", "error", "cancelled"
]

QUEUE_LIMIT = 1000  # events kept for one slow subscriber before the oldest are dropped


@dataclass(frozen=True)
class TurnEvent:
    """``turn`` names one turn (the same for all its events); ``text`` is the delta for
    ``text``, the reply for ``final`` and the message for ``error``; ``tool``/``summary``
    (a short scrubbed view of the arguments)/``duration`` (seconds)/``ok`` describe a
    tool call."""

    kind: EventKind
    session_key: str
    turn: str
    text: str = ""
    tool: str = ""
    summary: str = ""
    duration: float = 0.0
    ok: bool = True


class Subscription:
    """What one subscriber receives: ``async for ev in sub`` or ``await sub.get()``."""

    def __init__(self, key: str | None, limit: int = QUEUE_LIMIT) -> None:
        self.key = key
        self.dropped = 0
        self._queue: asyncio.Queue[TurnEvent] = asyncio.Queue(maxsize=limit)

    def wants(self, ev: TurnEvent) -> bool:
        return self.key is None or self.key == ev.session_key

    def put(self, ev: TurnEvent) -> None:
        if self._queue.full():
            self._queue.get_nowait()
            self.dropped += 1
        self._queue.put_nowait(ev)

    async def get(self) -> TurnEvent:
        return await self._queue.get()

    def get_nowait(self) -> TurnEvent | None:
        try:
            return self._queue.get_nowait()
        except asyncio.QueueEmpty:
            return None

    def __aiter__(self) -> AsyncIterator[TurnEvent]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[TurnEvent]:
        while True:
            yield await self._queue.get()


class TurnEvents:
    """The hub: ``publish`` never blocks; ``subscribe(key)`` (None: every session) is a
    context manager that yields a :class:`Subscription` and removes it on exit."""

    def __init__(self) -> None:
        self._subs: list[Subscription] = []

    def publish(self, ev: TurnEvent) -> None:
        for sub in tuple(self._subs):
            if sub.wants(ev):
                sub.put(ev)

    @contextlib.contextmanager
    def subscribe(self, key: str | None = None) -> Iterator[Subscription]:
        sub = Subscription(key)
        self._subs.append(sub)
        try:
            yield sub
        finally:
            with contextlib.suppress(ValueError):
                self._subs.remove(sub)

    def watching(self, key: str) -> bool:
        """Someone subscribed to this session's events (or to every session's)."""
        return any(sub.key is None or sub.key == key for sub in self._subs)

    @property
    def subscribers(self) -> int:
        return len(self._subs)
