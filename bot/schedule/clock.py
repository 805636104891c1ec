"""The scheduler's clock: wall time and a way to wait for it, injectable so tests move time
instead of waiting for it."""

from __future__ import annotations

import asyncio
import time
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float: ...

    async def sleep_until(self, when: float) -> None: ...


class WallClock:
    """The server clock.  Waits are cut into slices of at most ``SLICE`` seconds, so a
    clock that jumps (a suspended machine, an NTP step) is noticed within one slice."""

    SLICE = 30.0

    def now(self) -> float:
        return time.time()

    async def sleep_until(self, when: float) -> None:
        left = when - time.time()
        while left > 0:
            await asyncio.sleep(min(left, self.SLICE))
            left = when - time.time()


class ManualClock:
    """A clock that only moves when told (tests): ``await advance(s)`` wakes every sleeper
    whose time has come and lets them run."""

    def __init__(self, start: float) -> None:
        self._now = start
        self._changed = asyncio.Event()

    def now(self) -> float:
        return self._now

    async def sleep_until(self, when: float) -> None:
        while self._now < when:
            self._changed.clear()
            await self._changed.wait()

    async def advance(self, seconds: float) -> None:
        self.set(self._now + seconds)
        for _ in range(50):  # let woken tasks run to their next wait
            await asyncio.sleep(0)

    def set(self, when: float) -> None:
        self._now = when
        self._changed.set()
