"""The daemon's side of a channel adapter in the adapter tests: the sink ``start()`` is given.

It records each inbound message the adapter hands over and can stand in for a daemon that is
still busy (``gate``) or failing to store the message (``fail_times``), so a test
can check that the adapter confirms a message to its platform only once the sink took it."""

from __future__ import annotations

import asyncio

from channels.base import InboundMessage


class Sink:
    def __init__(self, *, fail_times: int = 0) -> None:
        self.messages: list[InboundMessage] = []
        self.calls = 0  # every hand-over, failed ones included
        self.fail_times = fail_times  # the next n hand-overs raise, as a locked database would
        self.gate: asyncio.Event | None = None  # when set, each hand-over waits for it
        self.entered = asyncio.Event()
        self._changed = asyncio.Event()

    async def __call__(self, msg: InboundMessage, cursor: tuple[str, int] | None = None) -> None:
        self.calls += 1
        self.entered.set()
        if self.gate is not None:
            await self.gate.wait()
        if self.fail_times > 0:
            self.fail_times -= 1
            raise RuntimeError("database is locked")
        self.messages.append(msg)
        self._changed.set()

    async def wait(self, n: int = 1, timeout: float = 5.0) -> list[InboundMessage]:
        """The messages, once there are at least ``n`` (AssertionError after ``timeout``)."""

        async def enough() -> None:
            while len(self.messages) < n:
                self._changed.clear()
                await self._changed.wait()

        try:
            await asyncio.wait_for(enough(), timeout)
        except TimeoutError:
            raise AssertionError(
                f"expected {n} inbound messages, got {len(self.messages)}"
            ) from None
        return self.messages
