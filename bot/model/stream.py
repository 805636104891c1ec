"""A streamed answer (``stream=True``) collected into the :class:`Completion` that
``_parse_response`` would build from the whole answer: content deltas joined (each passed
on as it arrives), tool-call deltas assembled by their index, usage from the final chunk
(``stream_options.include_usage``)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from bot.model.errors import empty_answer
from bot.model.response import (
    Completion,
    _get,
    arguments_text,
    content_text,
    tool_call,
    usage_numbers,
)
from bot.rules.untrusted import valid_utf8
from channels.best_effort import best_effort

log = logging.getLogger(__name__)


class _Collector:
    """The chunks of one stream, added as they arrive."""

    def __init__(self, emit: Callable[[str], None]) -> None:
        self.emit = emit
        self.parts: list[str] = []
        self.calls: dict[int, list[str]] = {}  # index -> [id, name, arguments]
        self.finish: str | None = None
        self.usage: dict[str, int] = {}
        self.saw_choice = False

    def add(self, chunk: Any) -> None:
        u = _get(chunk, "usage")
        if u:
            self.usage = usage_numbers(u) or self.usage
        choices = _get(chunk, "choices") or []
        if not choices:
            return
        self.saw_choice = True
        choice = choices[0]
        delta = _get(choice, "delta")
        content = content_text(_get(delta, "content"))
        if content:
            self.parts.append(content)
            self.emit(content)
        for tc in _get(delta, "tool_calls") or []:
            self._add_call(tc)
        reason = _get(choice, "finish_reason")
        if reason:
            self.finish = reason

    def _add_call(self, tc: Any) -> None:
        idx = _get(tc, "index")
        if not isinstance(idx, int):
            idx = len(self.calls) if _get(tc, "id") or not self.calls else max(self.calls)
        slot = self.calls.setdefault(idx, ["", "", ""])
        if _get(tc, "id"):
            slot[0] = str(_get(tc, "id"))
        fn = _get(tc, "function")
        name = _get(fn, "name")
        if name and name != slot[1]:
            slot[1] += name  # names come whole (OpenAI) or in pieces
        args = _get(fn, "arguments")
        if args:
            slot[2] += arguments_text(args)

    def result(self) -> Completion:
        if not self.saw_choice:
            raise empty_answer()
        return Completion(
            text=valid_utf8("".join(self.parts)),
            tool_calls=[tool_call(s[0], s[1], s[2]) for _, s in sorted(self.calls.items())],
            usage=self.usage,
            raw_finish_reason=self.finish,
        )


async def collect(stream: Any, emit: Callable[[str], None], chunk_timeout: float) -> Completion:
    """The whole answer of ``stream``; each chunk must arrive within ``chunk_timeout``."""
    collector = _Collector(emit)
    it = stream.__aiter__()
    try:
        while True:
            try:
                async with asyncio.timeout(chunk_timeout):
                    chunk = await it.__anext__()
            except StopAsyncIteration:
                break
            collector.add(chunk)
    finally:
        await _close_stream(stream)
    return collector.result()


async def _close_stream(stream: Any) -> None:
    """Close a stream that was not read to its end (a failure, a cancelled turn) so its
    connection goes back to the pool."""
    for target in (stream, getattr(stream, "completion_stream", None)):
        close = getattr(target, "aclose", None)
        if close is not None:
            with best_effort(log, "closing a model stream"):
                await close()
            return
