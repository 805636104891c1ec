"""``POST /ui/api/events`` (SPEC §16.5): ``hello``, then the notices that followed ``after``
(replayed from the last 1,000 kept), then live ones as they are published; with
``"logs": true`` also every new log line (``log.line``, scrubbed).  A comment line every
15 s keeps the connection open."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from aiohttp import web

from bot.reports.notices import Notice
from bot.ui.api.common import BadRequest, body, guarded, state
from bot.ui.turns import KEEPALIVE, open_stream, sse


def _after(data: dict[str, Any]) -> int | None:
    after = data.get("after")
    if after is None:
        return None
    if isinstance(after, bool) or not isinstance(after, int) or after < 0:
        raise BadRequest("after must be a notice number or null")
    return after


async def _pump(
    resp: web.StreamResponse,
    queue: asyncio.Queue[Notice],
    lines: asyncio.Queue[dict],
    last: int,
    closing: asyncio.Event,
) -> None:
    getters: dict[str, asyncio.Task] = {"c": asyncio.ensure_future(closing.wait())}
    try:
        while not closing.is_set():
            if "n" not in getters:
                getters["n"] = asyncio.ensure_future(queue.get())
            if "l" not in getters:
                getters["l"] = asyncio.ensure_future(lines.get())
            done, _ = await asyncio.wait(
                getters.values(), timeout=KEEPALIVE, return_when=asyncio.FIRST_COMPLETED
            )
            if not done:
                await resp.write(b": keep-alive\n\n")
                continue
            if getters["n"] in done:
                notice = getters.pop("n").result()
                if notice.seq > last:
                    last = notice.seq
                    await resp.write(sse(notice.name, notice.data, notice.seq))
            if "l" in getters and getters["l"] in done:
                await resp.write(sse("log.line", getters.pop("l").result()))
    finally:
        for task in getters.values():
            task.cancel()


async def events(request: web.Request) -> web.StreamResponse:
    st = state(request)
    data = await body(request)
    after = _after(data)
    want_logs = data.get("logs") is True
    notices = st.ctx.notices
    lines: asyncio.Queue[dict] = asyncio.Queue(maxsize=1000)

    def on_line(line: dict) -> None:
        with contextlib.suppress(asyncio.QueueFull):
            lines.put_nowait(line)

    with notices.subscribe() as queue:
        if want_logs:
            st.hub.listeners.add(on_line)
        try:
            resp = await open_stream(request)
            last = notices.seq
            await resp.write(sse("hello", {"seq": last}, last))
            if after is not None:
                # a number from before a restart (larger than any now): replay all kept
                for notice in notices.since(after if after <= last else 0):
                    if notice.seq <= last:
                        await resp.write(sse(notice.name, notice.data, notice.seq))
            await _pump(resp, queue, lines, last, st.closing)
            await resp.write_eof()
        except ConnectionResetError:
            pass
        finally:
            st.hub.listeners.discard(on_line)
    return resp


def register(app: web.Application) -> None:
    app.router.add_post("/api/events", guarded(events))
