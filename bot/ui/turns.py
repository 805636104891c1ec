"""The web turns the Control UI started, each as the log of its stream.

A :class:`TurnLog` is the :class:`~bot.conversation.web.WebSink` of one web turn: it keeps
every event the turn's stream carries (``turn.started``, ``delta``, ``tool.started``,
``tool.finished``, then ``final`` or ``error``) so that any number of readers can follow it:
the POST that started it, and a second POST with the same ``client_msg_id`` after a reload
(it replays, then follows what is still to come).  A reader that goes away stops reading;
the turn goes on.  Finished logs are kept a while for replays, then forgotten (the stored
answer still answers a late replay)."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator
from typing import Any

from aiohttp import web

from bot.delivery.previews import StreamEvent
from bot.store import Store
from bot.ui.api.transcript import answer_of, turn_cost
from bot.ui.guard import session_live
from bot.ui.hub import scrub_data

KEEP_FINISHED = 200  # finished turn logs kept for replays
KEEPALIVE = 15.0  # seconds between two comment lines of an idle stream

Event = tuple[str, dict[str, Any]]


class TurnLog:
    def __init__(self, store: Store, session: str, client_msg_id: str) -> None:
        self.store = store
        self.session = session
        self.client_msg_id = client_msg_id
        self.turn_id = uuid.uuid4().hex
        self.events: list[Event] = []
        self.done = False
        self._changed = asyncio.Event()
        self._calls: list[tuple[str, str]] = []  # (call id, tool name) started, not finished
        self._n = 0
        self._usage = {"prompt_tokens": 0, "completion_tokens": 0, "cost_usd": 0.0}
        self._add("turn.started", {"client_msg_id": client_msg_id, "session": session})

    def _add(self, name: str, data: dict[str, Any]) -> None:
        if self.done:
            return
        self.events.append((name, {"turn_id": self.turn_id, **data}))
        if name in ("final", "error"):
            self.done = True
        self._changed.set()
        self._changed = asyncio.Event()

    # --------------------------------------------------------------- WebSink
    def push(self, ev: StreamEvent) -> None:
        if ev.kind == "text" and ev.text:
            self._add("delta", {"text": ev.text})
        elif ev.kind == "usage":
            for k in ("prompt_tokens", "completion_tokens"):
                self._usage[k] += int(ev.usage.get(k, 0) or 0)
        elif ev.kind == "tool_start":
            self._n += 1
            call = f"call_{self._n}"
            self._calls.append((call, ev.tool))
            self._add("tool.started", {"call_id": call, "name": ev.tool, "summary": ev.summary})
        elif ev.kind == "tool_end":
            call = self._take_call(ev.tool)
            self._add(
                "tool.finished",
                {
                    "call_id": call,
                    "name": ev.tool,
                    "ok": ev.ok,
                    "duration_ms": round(ev.duration * 1000),
                    "result_chars": ev.result_chars,
                },
            )

    def _take_call(self, tool: str) -> str:
        for i, (call, name) in enumerate(self._calls):
            if name == tool:
                del self._calls[i]
                return call
        self._n += 1
        return f"call_{self._n}"

    def finished(self, *, turn: str, text: str, stopped: bool, usage: dict[str, Any]) -> None:
        message = answer_of(self.store, self.session, turn) if turn else None
        if message is None:
            message = {
                "id": None,
                "role": "assistant",
                "text": text,
                "created": None,
                "channel": "web",
                "client_msg_id": None,
                "tool": None,
                "images": [],
            }
        spent = self._usage_of(usage)
        if turn:
            spent["cost_usd"] = turn_cost(self.store, self.session, turn)
        self.final(message, stopped=stopped, usage=spent)

    def final(self, message: dict, *, stopped: bool, usage: dict[str, Any]) -> None:
        self._add("final", {"message": message, "stopped": stopped, "usage": usage})

    def failed(self, code: str, message: str) -> None:
        self._add("error", {"code": code, "message": message})

    def _usage_of(self, usage: dict[str, Any]) -> dict[str, Any]:
        if not usage:
            return dict(self._usage)
        return {
            "prompt_tokens": int(usage.get("prompt_tokens", 0) or 0),
            "completion_tokens": int(usage.get("completion_tokens", 0) or 0),
            "cost_usd": float(usage.get("cost_usd", usage.get("cost", 0.0)) or 0.0),
        }

    # ---------------------------------------------------------------- readers
    async def follow(self) -> AsyncIterator[Event | None]:
        """Every event from the first; None when nothing happened for ``KEEPALIVE`` s."""
        i = 0
        while True:
            while i < len(self.events):
                yield self.events[i]
                i += 1
            if self.done:
                return
            changed = self._changed
            try:
                await asyncio.wait_for(changed.wait(), KEEPALIVE)
            except TimeoutError:
                yield None


class TurnLogs:
    """The logs by (session, client_msg_id): running ones, and the last finished ones."""

    def __init__(self) -> None:
        self._logs: OrderedDict[tuple[str, str], TurnLog] = OrderedDict()

    def get(self, session: str, cid: str) -> TurnLog | None:
        return self._logs.get((session, cid))

    def add(self, log: TurnLog) -> None:
        self._logs[(log.session, log.client_msg_id)] = log
        finished = [k for k, v in self._logs.items() if v.done]
        for k in finished[: max(0, len(finished) - KEEP_FINISHED)]:
            del self._logs[k]

    def drop(self, log: TurnLog) -> None:
        if self._logs.get((log.session, log.client_msg_id)) is log:
            del self._logs[(log.session, log.client_msg_id)]


def sse(name: str, data: dict[str, Any], seq: int | None = None) -> bytes:
    """One event in ``text/event-stream`` form (``data`` is one line of JSON)."""
    head = f"id: {seq}\n" if seq is not None else ""
    body = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return f"{head}event: {name}\ndata: {body}\n\n".encode()


async def open_stream(request: web.Request) -> web.StreamResponse:
    resp = web.StreamResponse(
        status=200,
        headers={
            "Content-Type": "text/event-stream; charset=utf-8",
            "Cache-Control": "no-store",
            "X-Accel-Buffering": "no",
        },
    )
    await resp.prepare(request)
    return resp


async def stream_log(
    request: web.Request, log: TurnLog, secrets: tuple[str, ...] = ()
) -> web.StreamResponse:
    """Write the turn's events (``secrets`` redacted) to the client until ``final`` or
    ``error``; a client that goes away ends the writing, never the turn.  So does the end
    of the browser session that opened the stream (asked before every write, as the events
    stream does): a revoked session gets nothing more."""
    resp = await open_stream(request)
    try:
        async for item in log.follow():
            if not session_live(request):
                break
            if item is None:
                await resp.write(b": keep-alive\n\n")
            else:
                await resp.write(sse(item[0], scrub_data(item[1], secrets)))
    except ConnectionResetError:  # the page went away; the turn goes on
        return resp
    await resp.write_eof()
    return resp
