"""The terminal channel behind ``chela chat``: stdin in, stdout out, same pipeline."""

from __future__ import annotations

import asyncio
import sys
import time
import uuid
from typing import TextIO

from channels.base import Capabilities, Channel, InboundMessage, InboundSink, OutboundMessage


class TerminalChannel(Channel):
    name = "terminal"
    capabilities = Capabilities(max_text=1_000_000, proactive=False)

    def __init__(self, *, out: TextIO | None = None, user: str = "local"):
        self.out = out or sys.stdout
        self.user = user
        self._sink: InboundSink | None = None
        self._waiting: dict[str, asyncio.Future] = {}

    async def start(self, sink: InboundSink) -> None:
        self._sink = sink

    async def stop(self) -> None:
        for f in self._waiting.values():
            if not f.done():
                f.cancel()

    async def send(self, msg: OutboundMessage) -> list[str]:
        # no media capability: the core has already turned attachments into text
        print(msg.text.strip(), file=self.out, flush=True)
        return [uuid.uuid4().hex]

    async def turn_done(self, chat_id: str, message_id: str) -> None:
        fut = self._waiting.pop(message_id, None)
        if fut and not fut.done():
            fut.set_result(None)

    async def ask(self, text: str, timeout: float = 900.0) -> None:
        """Send one line as the local user and wait until the core is done with it."""
        assert self._sink is not None, "start() first"
        mid = uuid.uuid4().hex
        fut = asyncio.get_running_loop().create_future()
        self._waiting[mid] = fut
        await self._sink(InboundMessage(channel="terminal", chat_id="local", sender_id=self.user,
                                        sender_name=self.user, text=text, message_id=mid,
                                        timestamp=time.time(), chat_type="direct"))
        await asyncio.wait_for(fut, timeout)
