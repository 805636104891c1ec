"""``POST /ui/api/events``: ``hello``, then the notices that followed ``after``
(replayed from the last 1,000 kept), then live ones as they are published; with
``"logs": true`` also every new log line (``log.line``, scrubbed).  A comment line every
15 s keeps the connection open.  Every event is scrubbed of secret values (a platform error
may quote a token), and the stream ends once the browser session that opened it has ended
(logout, Revoke, ``--revoke-all``, expiry) or the daemon stops."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from bot.reports.notices import Notice
from bot.ui.api.common import ApiState, BadRequest, body, guarded, state
from bot.ui.guard import session_live
from bot.ui.hub import scrub_data, secret_values
from bot.ui.turns import KEEPALIVE, open_stream, sse


def _after(data: dict[str, Any]) -> int | None:
    after = data.get("after")
    if after is None:
        return None
    if isinstance(after, bool) or not isinstance(after, int) or after < 0:
        raise BadRequest("after must be a notice number or null")
    return after


@dataclass
class _Stream:
    st: ApiState
    resp: web.StreamResponse
    request: web.Request
    secrets: tuple[str, ...]
    last: int = 0
    lines: asyncio.Queue[dict] = field(default_factory=lambda: asyncio.Queue(maxsize=1000))

    def alive(self) -> bool:
        """The browser session that opened the stream is still live (asked before every
        write, so an ended session's open stream gets nothing more)."""
        return session_live(self.request)

    def on_line(self, line: dict) -> None:
        with contextlib.suppress(asyncio.QueueFull):
            self.lines.put_nowait(line)

    async def notice(self, n: Notice) -> None:
        await self.resp.write(sse(n.name, scrub_data(n.data, self.secrets), n.seq))

    async def replay(self, after: int) -> None:
        notices = self.st.ctx.notices
        # a number from before a restart (larger than any now): replay all kept
        for n in notices.since(after if after <= self.last else 0):
            if n.seq <= self.last:
                await self.notice(n)

    async def pump(self, queue: asyncio.Queue[Notice]) -> None:
        closing = self.st.closing
        getters: dict[str, asyncio.Task] = {"c": asyncio.ensure_future(closing.wait())}
        try:
            while not closing.is_set():
                getters.setdefault("n", asyncio.ensure_future(queue.get()))
                getters.setdefault("l", asyncio.ensure_future(self.lines.get()))
                done, _ = await asyncio.wait(
                    getters.values(), timeout=KEEPALIVE, return_when=asyncio.FIRST_COMPLETED
                )
                if not self.alive():
                    return
                if not done:
                    await self.resp.write(b": keep-alive\n\n")
                if getters["n"] in done:
                    n = getters.pop("n").result()
                    if n.seq > self.last:
                        self.last = n.seq
                        await self.notice(n)
                if getters["l"] in done:
                    await self.resp.write(sse("log.line", getters.pop("l").result()))
        finally:
            for task in getters.values():
                task.cancel()


async def events(request: web.Request) -> web.StreamResponse:
    st = state(request)
    data = await body(request)
    after = _after(data)
    notices = st.ctx.notices
    secrets = tuple(secret_values(st.ctx.cfg))
    with notices.subscribe() as queue:
        resp = await open_stream(request)
        stream = _Stream(st, resp, request, secrets, notices.seq)
        if data.get("logs") is True:
            st.hub.listeners.add(stream.on_line)
        try:
            await resp.write(sse("hello", {"seq": stream.last}, stream.last))
            if after is not None:
                await stream.replay(after)
            await stream.pump(queue)
            await resp.write_eof()
        except ConnectionResetError:
            pass
        finally:
            st.hub.listeners.discard(stream.on_line)
    return resp


def register(app: web.Application) -> None:
    app.router.add_post("/api/events", guarded(events))
