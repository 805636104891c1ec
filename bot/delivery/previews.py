"""Live output of a turn while the model writes it.

The agent loop reports what the model streams as :class:`StreamEvent` values: ``text``
(a piece of the current model call's content), ``step`` (a new model call begins, after
tool calls: the text so far was an intermediate step) and ``usage`` (one call's token
counts).  Two consumers turn them into something a user sees:

* :class:`Preview` — chat channels with ``streaming = "partial"`` (Telegram, Discord,
  Slack): one plain-text message, sent when the first visible text exists and edited at
  most once per ``interval`` seconds.  When the turn ends the conversation points the final
  reply at it (``OutboundMessage.edit_id``): the adapter edits the preview into the first
  chunk of the formatted reply, so the user ends up with exactly one reply.  A silent
  final reply deletes it.
* :class:`StreamText` — a request/response channel whose caller asked for tokens as they
  arrive (the HTTP API's ``stream: true``): append-only text deltas.

Both show only :func:`visible_text` of what the model wrote: the same rules
``bot.rules.replies.parse_reply`` applies to a final reply (``NO_REPLY``, ``HEARTBEAT_OK``, reply
tags, media markers), ``<think>`` content and ``<tool_call>`` blocks removed, and an
undecided tail held back (``NO_`` may become ``NO_REPLY``, ``[[rep`` a reply tag, ``<thi``
a ``<think>``).

Ordering guarantees (the peers' bugs: a preview left next to the final reply, a late
preview edit landing after the final one, edits flooding the chat):

* at most one platform call of a preview is in flight, and calls are ``interval`` apart
  by the injected ``clock``;
* :meth:`Preview.finish` stops the preview and waits for a call in flight (never
  cancelling it: a cancelled HTTP request may leak a pool slot), so nothing of the
  preview reaches the platform after the final reply is handed to the outbox;
* a preview that failed once (the platform refused an edit) stops; the final reply is
  then sent as a new message and the stale preview deleted.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from bot.rules.textproto import split_reasoning
from bot.rules.replies import HEARTBEAT_TOKEN, SILENT_TOKEN, closes_span, parse_reply
from channels.base import Channel, OutboundMessage

log = logging.getLogger("chela.streaming")

PREVIEW_INTERVAL = 1.0  # seconds between two platform calls of one preview
_ELLIPSIS = "…"


@dataclass(frozen=True)
class StreamEvent:
    """One step of a turn as it happens.  ``text``: content as it arrives; ``step``: a new
    model call begins; ``usage``: one call's token counts; ``tool_start``/``tool_end``: a
    tool call (``tool`` its name, ``summary`` a short scrubbed view of its arguments;
    ``duration`` in seconds, ``ok`` and ``result_chars``, the length of the result the model
    is given, on ``tool_end``).  Previews ignore the tool kinds."""

    kind: Literal["text", "step", "usage", "tool_start", "tool_end"]
    text: str = ""
    usage: dict[str, int] = field(default_factory=dict)
    tool: str = ""
    summary: str = ""
    duration: float = 0.0
    ok: bool = True
    result_chars: int = 0


OnEvent = Callable[[StreamEvent], None]


# ------------------------------------------------------------------------------ filter
# tags whose beginning, cut off at the end of the text, must not be shown yet
_HELD_TAGS = ("<think", "<thinking", "</think", "</thinking", "<final", "</final")
_TOOL_CALL_RE = re.compile(r"<\s*tool_call\b", re.IGNORECASE)
_WRAP_CHARS = "*_~`"
_SILENT_JSON = '{"action":"no_reply"}'


def _held_tag_start(text: str) -> int:
    """Where a tag that is still being written begins at the end of ``text`` (-1: none)."""
    lt = text.rfind("<")
    if lt < 0 or ">" in text[lt:] or len(text) - lt > 16:
        return -1
    tail = re.sub(r"\s+", "", text[lt:]).lower()
    if any(t.startswith(tail) for t in (*_HELD_TAGS, "<tool_call", "</tool_call")):
        return lt
    return -1


def _held_bracket_start(text: str) -> int:
    """Where a reply tag or media marker that is still open begins (-1: none).  Both are
    one line long; an unclosed ``[`` further back or before a newline is plain text."""
    nl = text.rfind("\n") + 1
    double = text.rfind("[[", nl)
    if double >= 0 and "]]" not in text[double:] and len(text) - double <= 300:
        return double
    single = text.rfind("[", nl)
    if single >= 0 and "]" not in text[single:] and len(text) - single <= 300:
        return single
    return -1


def _is_token_prefix(word: str) -> bool:
    """``word`` (Markdown wrapping ignored) may still become NO_REPLY or HEARTBEAT_OK."""
    bare = word.strip().strip(_WRAP_CHARS)
    if not bare:
        return bool(word.strip())  # "**" alone may open a wrapped token
    return SILENT_TOKEN.startswith(bare.upper()) or HEARTBEAT_TOKEN.startswith(bare)


_GLUED_RE = re.compile(r"(?<=\w)(?P<wrap>[*~`]+)(?P<tail>[A-Za-z_]*)$")


def _held_glued_token(shown: str) -> int:
    """Where markup glued to a word that may still become a token begins (-1: none):
    ``reasoning**NO_RE`` may end as ``reasoning**NO_REPLY``, which is delivered as
    ``reasoning`` (markup that closes a span, ``**bold**``, is text)."""
    m = _GLUED_RE.search(shown)
    if not m or (m.group("tail") and not _is_token_prefix(m.group("tail"))):
        return -1
    if closes_span(shown[: m.start()], m.group("wrap")):
        return m.end("wrap") if m.group("tail") else -1
    return m.start()


def visible_text(raw: str) -> str:
    """What a live preview may show of ``raw`` (one model call's text so far): the final
    reply rules applied to the part that is already decided."""
    text = raw or ""
    cut = _held_tag_start(text)
    if cut >= 0:
        text = text[:cut]
    m = _TOOL_CALL_RE.search(text)
    if m:
        text = text[: m.start()]
    text, _thinking = split_reasoning(text)  # an unclosed <think> hides the rest
    cut = _held_bracket_start(text)
    if cut >= 0:
        text = text[:cut]
    compact = re.sub(r"\s+", "", text).lower()
    if compact and (
        _SILENT_JSON.startswith(compact) or (compact.startswith("{") and "no_reply" in compact)
    ):
        return ""  # may still be {"action": "NO_REPLY"}
    stripped = text.strip()
    if not stripped or _is_token_prefix(stripped):
        return ""
    plan = parse_reply(text)
    if plan.silent:
        return ""
    shown = plan.text
    # a last word that may still become a token is held back
    m2 = re.search(r"(\S+)$", shown)
    if m2 and not raw[len(raw.rstrip()) :] and _is_token_prefix(m2.group(1)):
        shown = shown[: m2.start()].rstrip()
    glued = _held_glued_token(shown) if not raw[len(raw.rstrip()) :] else -1
    return shown[:glued].rstrip() if glued >= 0 else shown


# ----------------------------------------------------------------------------- preview
class Preview:
    """One live preview message in a chat (see the module docstring).

    ``channel`` must have ``capabilities.edit``.  ``clock`` and ``sleep`` are injectable
    (tests drive a fake clock).  ``calls`` records ``(clock, op, text)`` of every platform
    call made."""

    def __init__(
        self,
        channel: Channel,
        chat_id: str,
        *,
        thread_id: str | None = None,
        reply_to_id: str | None = None,
        interval: float = PREVIEW_INTERVAL,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
        max_chars: int = 4000,
    ) -> None:
        self.channel = channel
        self.chat_id = chat_id
        self.thread_id = thread_id
        self.reply_to_id = reply_to_id
        self.interval = interval
        self.clock = clock
        self.sleep = sleep
        self.max_chars = max(16, max_chars)
        self.message_id: str | None = None
        self.shown = ""
        self.calls: list[tuple[float, str, str]] = []
        self.failed = False
        self._raw = ""
        self._closed = False
        self._in_call = False
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    # the agent loop's callback (sync: it never waits for the platform)
    def push(self, ev: StreamEvent) -> None:
        if self._closed or self.failed:
            return
        if ev.kind == "text":
            self._raw += ev.text
        elif ev.kind == "step":
            self._raw = ""  # the shown text stays until the next call has visible text
            return
        else:
            return
        self._wake.set()
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=f"preview:{self.chat_id}")

    def _text(self) -> str:
        text = visible_text(self._raw)
        if len(text) > self.max_chars:
            text = text[: self.max_chars - 1].rstrip() + _ELLIPSIS
        return text

    async def _run(self) -> None:
        while not self._closed:
            await self._wake.wait()
            self._wake.clear()
            if self._closed:
                return
            if self.calls:
                wait = self.calls[-1][0] + self.interval - self.clock()
                if wait > 0:
                    await self.sleep(wait)
                    if self._closed:
                        return
            text = self._text()
            if not text.strip() or text == self.shown:
                continue
            self._in_call = True
            try:
                if self.message_id is None:
                    self.message_id = await self.channel.send_preview(
                        self.chat_id, text, thread_id=self.thread_id, reply_to_id=self.reply_to_id
                    )
                    op = "send"
                else:
                    await self.channel.edit_preview(
                        self.chat_id, self.message_id, text, thread_id=self.thread_id
                    )
                    op = "edit"
            except Exception as e:
                log.info("preview in %s/%s stopped: %s", self.channel.name, self.chat_id, e)
                self.failed = True
                return
            finally:
                self._in_call = False
            self.shown = text
            self.calls.append((self.clock(), op, text))

    async def finish(self) -> str | None:
        """Stop previewing; wait for a platform call in flight.  Returns the preview's
        message id (None when nothing was shown)."""
        self._closed = True
        self._wake.set()
        task = self._task
        if task is not None and not task.done():
            if not self._in_call:
                task.cancel()  # waiting or sleeping: nothing in flight
            with contextlib.suppress(asyncio.CancelledError):
                await task
        return self.message_id

    async def delete(self) -> None:
        """Remove the preview message (a silent reply, a failed turn)."""
        mid = await self.finish()
        if mid is None:
            return
        self.message_id = None
        try:
            await self.channel.delete_message(self.chat_id, mid, thread_id=self.thread_id)
        except Exception as e:
            log.warning(
                "could not delete the preview %s in %s/%s: %s",
                mid,
                self.channel.name,
                self.chat_id,
                e,
            )
        self.calls.append((self.clock(), "delete", ""))

    async def settle(self, outs: list[OutboundMessage]) -> None:
        """The turn ended with ``outs`` (already built, not yet stored): the first reply
        replaces the preview when it goes to the same place and has text; otherwise the
        preview is deleted (a silent reply, media only, another reply target)."""
        mid = await self.finish()
        if mid is None:
            return
        first = outs[0] if outs else None
        if (
            first is not None
            and first.text.strip()
            and not self.failed
            and first.chat_id == self.chat_id
            and first.thread_id == self.thread_id
            and first.reply_to_id == self.reply_to_id
        ):
            first.edit_id = mid
            return
        await self.delete()


# ------------------------------------------------------------------------- HTTP stream
class StreamText:
    """Append-only visible text for a caller that reads tokens as they arrive.

    ``sink`` gets ``("text", delta)``, ``("step", "")`` when a new model call begins after
    text was sent, and ``("usage", dict)`` per model call.  Text is only sent while what is
    visible continues what was sent (a held-back tail is sent once it is decided).

    The filter reads the whole text of the call, so it runs at most once per ``every``
    seconds (the first delta at once, later ones gathered): a long reply from a fast model
    costs a bounded amount of CPU.  ``close()`` sends what is still gathered."""

    def __init__(self, sink: Callable[[str, Any], None], *, every: float = 0.025) -> None:
        self.sink = sink
        self.every = every
        self._raw = ""
        self.sent = ""  # visible text sent for the current model call
        self._last = float("-inf")
        self._timer: asyncio.TimerHandle | None = None

    def push(self, ev: StreamEvent) -> None:
        if ev.kind == "usage":
            self.sink("usage", dict(ev.usage))
            return
        if ev.kind == "step":
            self.flush()
            if self.sent:
                self.sink("step", "")
            self._raw, self.sent = "", ""
            return
        if ev.kind != "text":
            return
        self._raw += ev.text
        if self._timer is not None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.flush()
            return
        wait = self._last + self.every - loop.time()
        if wait <= 0:
            self.flush()
        else:
            self._timer = loop.call_later(wait, self.flush)

    def flush(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        with contextlib.suppress(RuntimeError):
            self._last = asyncio.get_running_loop().time()
        shown = visible_text(self._raw)
        if len(shown) > len(self.sent) and shown.startswith(self.sent):
            delta = shown[len(self.sent) :]
            self.sent = shown
            self.sink("text", delta)

    def close(self) -> None:
        """The turn ended: send what is gathered (the final reply follows)."""
        self.flush()


__all__ = [
    "PREVIEW_INTERVAL",
    "OnEvent",
    "Preview",
    "StreamEvent",
    "StreamText",
    "visible_text",
]
