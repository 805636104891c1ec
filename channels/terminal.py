"""The terminal channel behind ``chela chat``: stdin in, stdout out, same pipeline.

Interactive use (:func:`chat_loop`) reads lines with prompt_toolkit (line editing, history),
shows a small "thinking" indicator while a turn runs, and maps Ctrl-C to "cancel the turn
in progress" or, at the prompt, "quit now".
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
import time
import uuid
from pathlib import Path
from typing import TextIO
from collections.abc import Awaitable, Callable

from channels.base import Capabilities, Channel, InboundMessage, InboundSink, OutboundMessage

SPINNER = "|/-\\"


class Thinking:
    """A one-line indicator on a terminal, erased before anything else is printed."""

    def __init__(self, out: TextIO, text: str = "thinking... (Ctrl-C cancels)"):
        self.out = out
        self.text = text
        self._task: asyncio.Task | None = None
        self._shown = False

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._spin())

    async def _spin(self) -> None:
        for i in range(10**9):
            self.out.write(f"\r{SPINNER[i % len(SPINNER)]} {self.text}")
            self.out.flush()
            self._shown = True
            await asyncio.sleep(0.12)

    def clear(self) -> None:
        if self._shown:
            self.out.write("\r\x1b[K")
            self.out.flush()
            self._shown = False

    def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
        self.clear()


class TerminalChannel(Channel):
    name = "terminal"
    capabilities = Capabilities(max_text=1_000_000, proactive=False)

    def __init__(self, *, out: TextIO | None = None, user: str = "local"):
        self.out = out or sys.stdout
        self.user = user
        self.thinking: Thinking | None = None
        self.last_message: InboundMessage | None = None
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
        if self.thinking is not None:
            self.thinking.clear()
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
        msg = InboundMessage(
            channel="terminal",
            chat_id="local",
            sender_id=self.user,
            sender_name=self.user,
            text=text,
            message_id=mid,
            timestamp=time.time(),
            chat_type="direct",
        )
        self.last_message = msg
        try:
            await self._sink(msg)
            await asyncio.wait_for(fut, timeout)
        finally:
            self._waiting.pop(mid, None)


async def chat_loop(
    term: TerminalChannel,
    *,
    history: Path | None = None,
    banner: str = "",
    on_cancel: Callable[[InboundMessage], Awaitable[None]] | None = None,
) -> int:
    """Interactive chat on a terminal until Ctrl-D, /quit or Ctrl-C at the prompt."""
    from prompt_toolkit import PromptSession
    from prompt_toolkit.history import FileHistory, History, InMemoryHistory

    out = term.out
    hist: History = InMemoryHistory()
    if history is not None:
        with contextlib.suppress(OSError):
            history.touch(mode=0o600, exist_ok=True)
            hist = FileHistory(str(history))
    session: PromptSession = PromptSession(history=hist)
    if banner:
        print(banner, file=out, flush=True)
    loop = asyncio.get_running_loop()
    while True:
        try:
            line = await session.prompt_async("you> ")
        except (KeyboardInterrupt, EOFError):
            print(file=out, flush=True)
            return 0
        if line.strip() in ("/quit", "/exit"):
            return 0
        if not line.strip():
            continue
        turn = asyncio.ensure_future(term.ask(line))
        term.thinking = Thinking(out)
        term.thinking.start()
        loop.add_signal_handler(signal.SIGINT, turn.cancel)
        try:
            await turn
        except asyncio.CancelledError:
            me = asyncio.current_task()
            if me is not None and me.cancelling():
                raise
            term.thinking.stop()
            print("(cancelled)", file=out, flush=True)
            if on_cancel is not None and term.last_message is not None:
                await on_cancel(term.last_message)
        finally:
            loop.remove_signal_handler(signal.SIGINT)
            term.thinking.stop()
            term.thinking = None


async def line_loop(term: TerminalChannel, stream: TextIO | None = None) -> int:
    """Non-terminal input (a pipe): one message per line, no prompt."""
    stream = stream or sys.stdin
    loop = asyncio.get_running_loop()
    while True:
        line = await loop.run_in_executor(None, stream.readline)
        if not line:
            return 0
        if line.strip():
            await term.ask(line.rstrip("\n"))
