"""The terminal channel behind ``chela chat``: stdin in, stdout out, same pipeline.

Interactive use (:func:`chat_loop`) reads lines with prompt_toolkit (line editing, history;
Alt-Enter or Esc-Enter inserts a newline, Enter sends), shows a small "thinking" indicator
while a turn runs, and maps Ctrl-C to "cancel the turn in progress", at the prompt to "clear
the line", or on an empty line to "quit now"; ``/stop`` typed while a reply is written
stops it as Ctrl-C does.  ``exit``, ``quit``, ``/exit`` and ``/quit`` end the chat; every
other slash command goes to the core, which answers an unknown one itself (never the model).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Protocol, TextIO

from channels.base import Capabilities, Channel, InboundMessage, InboundSink, OutboundMessage

SPINNER = "|/-\\"
QUIT_WORDS = ("exit", "quit", "/exit", "/quit")
STOP_WORD = "/stop"
CHAT_HELP = (
    "/quit or /exit (or exit, quit, Ctrl-D): end the chat\n"
    "Alt-Enter or Esc-Enter: new line; Enter: send; Ctrl-C: clear the line, cancel a reply, "
    "or quit on an empty line; /stop while a reply is written: stop it"
)


class View(Protocol):
    """What shows the replies and the turns (``bot.cli.chat_render.ChatView``)."""

    def reply(self, text: str) -> None: ...
    def end(self) -> None: ...


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
        self.view: View | None = None  # shows the replies (plain lines without one)
        self.last_message: InboundMessage | None = None
        self._sink: InboundSink | None = None
        self._waiting: dict[str, asyncio.Future] = {}
        self.typeahead: list[str] = []  # lines typed while a turn ran: sent next

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
        if self.view is not None:
            self.view.reply(msg.text)
        else:
            print(msg.text.strip(), file=self.out, flush=True)
        return [uuid.uuid4().hex]

    async def turn_done(self, chat_id: str, message_id: str) -> None:
        fut = self._waiting.pop(message_id, None)
        if fut and not fut.done():
            fut.set_result(None)

    def message(self, text: str) -> InboundMessage:
        """``text`` as a message of the local user (its session is the chat's session)."""
        return InboundMessage(
            channel="terminal",
            chat_id="local",
            sender_id=self.user,
            sender_name=self.user,
            text=text,
            message_id=uuid.uuid4().hex,
            timestamp=time.time(),
            chat_type="direct",
        )

    async def ask(self, text: str, timeout: float = 900.0) -> None:
        """Send one line as the local user and wait until the core is done with it."""
        assert self._sink is not None, "start() first"
        msg = self.message(text)
        mid = msg.message_id
        fut = asyncio.get_running_loop().create_future()
        self._waiting[mid] = fut
        self.last_message = msg
        try:
            await self._sink(msg)
            await asyncio.wait_for(fut, timeout)
        finally:
            self._waiting.pop(mid, None)


def _session(history: Path | None):
    """The prompt: history in a file (0600), Alt/Esc-Enter for a newline, Ctrl-C clearing
    the line (on an empty line it ends the prompt with KeyboardInterrupt)."""
    from prompt_toolkit import PromptSession
    from prompt_toolkit.history import FileHistory, History, InMemoryHistory
    from prompt_toolkit.key_binding import KeyBindings

    hist: History = InMemoryHistory()
    if history is not None:
        with contextlib.suppress(OSError):
            history.touch(mode=0o600, exist_ok=True)
            hist = FileHistory(str(history))
    keys = KeyBindings()

    @keys.add("escape", "enter")  # Alt-Enter reaches us as Esc then Enter
    def _newline(event) -> None:
        event.current_buffer.insert_text("\n")

    @keys.add("c-c")
    def _interrupt(event) -> None:
        buffer = event.current_buffer
        if buffer.text:
            buffer.reset()
        else:
            event.app.exit(exception=KeyboardInterrupt())

    return PromptSession(
        history=hist,
        key_bindings=keys,
        prompt_continuation=lambda width, *_: "." * (width - 1) + " ",
    )


def _typed_lines(on_line: Callable[[str], None]) -> Callable[[], None]:
    """Call ``on_line`` with each line typed on the terminal while a turn runs (the
    terminal is in line mode then: a line arrives when Enter is pressed); returns the undo."""
    loop = asyncio.get_running_loop()
    try:
        fd = sys.stdin.fileno()
    except (OSError, ValueError):
        return lambda: None
    if not os.isatty(fd):
        return lambda: None
    pending = bytearray()

    def readable() -> None:
        try:
            data = os.read(fd, 4096)
        except OSError:
            data = b""
        if not data:  # end of input: nothing more to watch
            loop.remove_reader(fd)
            return
        pending.extend(data.replace(b"\r", b"\n"))
        while b"\n" in pending:
            line, _, rest = bytes(pending).partition(b"\n")
            pending[:] = rest
            on_line(line.decode("utf-8", "replace"))

    loop.add_reader(fd, readable)

    def undo() -> None:
        loop.remove_reader(fd)

    return undo


async def _turn(
    term: TerminalChannel,
    line: str,
    on_cancel: Callable[[InboundMessage], Awaitable[None]] | None,
) -> None:
    """Send one line and wait for its end; Ctrl-C or a typed ``/stop`` meanwhile cancels
    it (other lines typed meanwhile are sent next)."""
    out = term.out
    loop = asyncio.get_running_loop()
    turn = asyncio.ensure_future(term.ask(line))
    term.thinking = Thinking(out)
    term.thinking.start()
    loop.add_signal_handler(signal.SIGINT, turn.cancel)
    stopped = False

    def typed(text: str) -> None:
        nonlocal stopped
        if text.strip().lower() == STOP_WORD:
            stopped = True
            turn.cancel()
        elif text.strip():
            term.typeahead.append(text)

    unwatch = _typed_lines(typed)
    try:
        await turn
    except asyncio.CancelledError:
        me = asyncio.current_task()
        if me is not None and me.cancelling():
            raise
        term.thinking.stop()
        if term.view is not None:
            term.view.end()
        print("Stopped." if stopped else "(cancelled)", file=out, flush=True)
        if on_cancel is not None and term.last_message is not None:
            await on_cancel(term.last_message)
    finally:
        unwatch()
        loop.remove_signal_handler(signal.SIGINT)
        term.thinking.stop()
        term.thinking = None
        if term.view is not None:
            term.view.end()


async def chat_loop(
    term: TerminalChannel,
    *,
    history: Path | None = None,
    banner: str = "",
    on_cancel: Callable[[InboundMessage], Awaitable[None]] | None = None,
) -> int:
    """Interactive chat on a terminal until Ctrl-D, exit/quit or Ctrl-C on an empty line.
    Slash commands go to the core like any line (it answers an unknown one itself)."""
    out = term.out
    session = _session(history)
    if banner:
        print(banner, file=out, flush=True)
    while True:
        if term.typeahead:  # typed while the last reply was written
            line = term.typeahead.pop(0)
            print(f"you> {line}", file=out, flush=True)
        else:
            try:
                line = await session.prompt_async("you> ")
            except (KeyboardInterrupt, EOFError):
                print(file=out, flush=True)
                return 0
        text = line.strip()
        if text.lower() in QUIT_WORDS:
            return 0
        if not text:
            continue
        await _turn(term, line, on_cancel)
        if text.lower() == "/help":
            print(CHAT_HELP, file=out, flush=True)


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
