"""What changed in the daemon, as a numbered stream of notices.

Approvals, pairing requests, failed deliveries, channel states and schedule runs each
publish a notice when something the owner may act on happens; the Control UI's event
stream subscribes.  Publishing never waits: a subscriber that falls behind loses its
oldest notices, and the last ``KEEP`` are kept so a reconnecting page can replay what it
missed (``since``)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

KEEP = 1000  # notices kept for replay (the last 1,000 events)
QUEUE_LIMIT = 1000  # notices queued for one slow subscriber before the oldest go


@dataclass(frozen=True)
class Notice:
    seq: int
    name: str  # e.g. approval.pending, pairing.resolved, delivery.failed, schedule.run
    data: dict[str, Any]
    time: float = field(default_factory=time.time)


class Notices:
    """One per daemon (built by the app, handed to whatever publishes)."""

    def __init__(self, keep: int = KEEP) -> None:
        self._seq = 0
        self._kept: deque[Notice] = deque(maxlen=keep)
        self._queues: set[asyncio.Queue[Notice]] = set()

    @property
    def seq(self) -> int:
        """The number of the newest notice (0 before the first)."""
        return self._seq

    def publish(self, name: str, data: dict[str, Any]) -> Notice:
        self._seq += 1
        notice = Notice(self._seq, name, dict(data))
        self._kept.append(notice)
        for queue in self._queues:
            if queue.full():
                with contextlib.suppress(asyncio.QueueEmpty):
                    queue.get_nowait()
            queue.put_nowait(notice)
        return notice

    def since(self, after: int | None) -> list[Notice]:
        """The kept notices newer than ``after`` (all kept ones for ``None``)."""
        if after is None:
            return list(self._kept)
        return [n for n in self._kept if n.seq > after]

    @contextlib.contextmanager
    def subscribe(self) -> Iterator[asyncio.Queue[Notice]]:
        """A queue that receives every notice published while the block runs."""
        queue: asyncio.Queue[Notice] = asyncio.Queue(maxsize=QUEUE_LIMIT)
        self._queues.add(queue)
        try:
            yield queue
        finally:
            self._queues.discard(queue)
