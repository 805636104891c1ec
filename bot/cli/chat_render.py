"""What ``chela chat`` shows of a turn (issue 27): the answer as it is written, then rendered
as Markdown; one dim line per tool call.

The view is fed :class:`~bot.conversation.events.TurnEvent` values (the conversation's turn
events) and the replies the terminal channel delivers.  On a terminal the streamed text is
replaced by its Markdown rendering once the reply is complete (when it still fits on the
screen; a longer one stays as it was written); elsewhere everything is plain text.  Markdown
needs ``rich`` (the ``chat`` extra); without it the reply is printed as written."""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable, Iterable
from typing import TextIO

from bot.conversation.events import TurnEvent

DIM, RESET, CLEAR_LINE = "\x1b[2m", "\x1b[0m", "\r\x1b[K"
# control characters a model or a tool could use to move the cursor or recolour the terminal
_CONTROL = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[@-_]|[\x00-\x08\x0b-\x1f\x7f\x9b]")
SUMMARY_MAX = 80


def clean(text: str) -> str:
    """Text as it may reach the terminal: no escape sequences, no control characters."""
    return _CONTROL.sub("", text)


def _cells(text: str) -> int:
    try:
        from rich.cells import cell_len
    except ImportError:  # pragma: no cover - rich is the chat extra
        return len(text)
    return cell_len(text)


def rows(text: str, width: int) -> int:
    """Terminal rows ``text`` takes when written from the start of a line."""
    width = max(width, 1)
    return sum(max(1, -(-_cells(line) // width)) for line in text.split("\n"))


def _terminal_size() -> tuple[int, int]:
    cols, lines = shutil.get_terminal_size()
    return cols, lines


def hard_breaks(text: str) -> str:
    """Every line break kept, as Telegram and the Control UI keep them: Markdown joins the
    lines of a paragraph, so ``/help``'s or ``/status``'s one item per line would print as
    one run-on paragraph.  Lines inside code fences are left as they are."""
    lines = text.split("\n")
    fenced = False
    for i, line in enumerate(lines[:-1]):
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
            continue
        if not fenced and line.strip() and lines[i + 1].strip() and not line.endswith("  "):
            lines[i] = line + "  "
    return "\n".join(lines)


def markdown(text: str, width: int) -> str | None:
    """``text`` rendered for a terminal (every line break kept), or None without ``rich``."""
    try:
        from rich.console import Console
        from rich.markdown import Markdown
    except ImportError:
        return None
    console = Console(force_terminal=True, width=width, color_system="standard")
    with console.capture() as cap:
        console.print(Markdown(hard_breaks(text)))
    return cap.get()


class ChatView:
    """One chat's output.  ``quiet`` hides the thinking indicator before anything is
    written; ``busy`` shows it again (after a tool line, while the turn goes on)."""

    def __init__(
        self,
        out: TextIO,
        *,
        tty: bool,
        secrets: Iterable[str] = (),
        size: Callable[[], tuple[int, int]] = _terminal_size,
        render: Callable[[str, int], str | None] = markdown,
        quiet: Callable[[], None] = lambda: None,
        busy: Callable[[], None] = lambda: None,
    ) -> None:
        self.out = out
        self.tty = tty
        self.secrets = tuple(s for s in secrets if len(s) >= 4)
        self.size = size
        self.render = render
        self.quiet = quiet
        self.busy = busy
        self.open = False  # a turn is running: its events are shown
        self.block = ""  # text streamed since the last tool line (what a reply may replace)
        self.col = 0  # characters written on the current line
        self.tool = ""  # the tool whose line is pending (written, without its duration)
        self.summary = ""  # its argument summary (tool_end does not repeat it)

    # ----------------------------------------------------------------- turn events
    def feed(self, ev: TurnEvent) -> None:
        if ev.kind == "started":
            self.open = True
            self.block = ""
            return
        if not self.open:
            return  # a finished or cancelled turn's late events
        if ev.kind == "text":
            self._text(ev.text)
        elif ev.kind in ("tool_start", "tool_end"):
            self._tool(ev)
        elif ev.kind == "step":
            self._close_tool()

    def _text(self, delta: str) -> None:
        delta = clean(self._scrub(delta))
        if not delta:
            return
        self._close_tool()
        self.quiet()
        if not self.block:
            delta = delta.lstrip("\n")
        self._write(delta)
        self.block += delta

    def _tool(self, ev: TurnEvent) -> None:
        self.quiet()
        self.block = ""  # text before a tool call stays as written
        name = clean(ev.tool) or "tool"
        if ev.kind == "tool_start":
            self._close_tool()
            self._end_line()
            self.summary = ev.summary
            if self.tty:
                self._write(self._tool_line(name, "…"))
                self.tool = name
            return
        if self.tool == name:
            self.out.write(CLEAR_LINE)
            self.col = 0
            self.tool = ""
        self._close_tool()
        self._end_line()
        self.col = 0
        mark = f"{ev.duration:.1f}s" + ("" if ev.ok else " failed")
        self._write(self._tool_line(name, mark) + "\n")
        self.summary = ""
        self.busy()

    def _tool_line(self, name: str, mark: str) -> str:
        text = clean(self._scrub(self.summary)).replace("\n", " ")
        # one row: a pending line is rewritten in place when the call ends
        room = min(SUMMARY_MAX, self.size()[0] - len(name) - len(mark) - 16)
        if len(text) > room:
            text = text[: max(room - 1, 0)] + "…"
        line = f"  · {name}" + (f" {text}" if text else "") + f" {mark}"
        return f"{DIM}{line}{RESET}" if self.tty else line

    def _close_tool(self) -> None:
        """A tool line still waiting for its end ends here (the next output is below it)."""
        if self.tool:
            self._write("\n")
            self.tool = ""
            self.col = 0

    # ----------------------------------------------------------------- replies
    def reply(self, text: str) -> None:
        """A delivered reply: it replaces the text streamed for it when that can be done."""
        self.quiet()
        self._close_tool()
        streamed, self.block = self.block, ""
        text = self._scrub(text).strip()
        width, height = self.size()
        on_screen = streamed and rows(streamed, width) < height
        if streamed and not on_screen:
            self._end_line()  # too long to replace: it stays as it was written
            return
        shown = self.render(text, width) if self.tty else None
        if streamed:
            up = rows(streamed, width) - 1
            self.out.write("\r" + (f"\x1b[{up}A" if up else "") + "\x1b[J")
            self.col = 0
        self._end_line()
        if shown is None:
            shown = clean(text) + "\n"
        self.out.write(shown if shown.endswith("\n") else shown + "\n")
        self.out.flush()

    def end(self) -> None:
        """The turn is over (answered, failed or cancelled): later events are not shown."""
        self._close_tool()
        self._end_line()
        self.open = False
        self.block = ""

    # ----------------------------------------------------------------- output
    def _scrub(self, text: str) -> str:
        for s in self.secrets:
            text = text.replace(s, "***")
        return text

    def _write(self, text: str) -> None:
        self.out.write(text)
        self.out.flush()
        tail = text.rsplit("\n", 1)
        self.col = len(tail[-1]) if len(tail) > 1 else self.col + len(text)

    def _end_line(self) -> None:
        if self.col:
            self._write("\n")
            self.col = 0
