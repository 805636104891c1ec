"""A wire-level fake of Meta's WhatsApp Agent Platform (the API an agent's key reaches), on
127.0.0.1, for tests and benchmarks::

    fake = FakeWhatsApp(key="k")
    await fake.start()
    # WhatsAppChannel through AgentPlatform(api_key="k", api_base=fake.api_base)
    wamid = fake.inject_text("hello")
    sent = await fake.wait_for_sent(1)

Endpoints (relative to ``api_base``): ``GET /updates`` (long poll: ``offset`` = the cursor
of the last answer taken, ``timeout`` 0–25 and ``limit`` 1–100 clamped, 204 when nothing
came, a newer poll answers an older one still waiting 409/1752041), ``POST /messages``,
``POST /statuses``, ``POST /media`` (multipart; types and sizes as the platform accepts),
``GET /media/<id>`` and the download under ``/files/<id>``.  Every call needs the bearer key
(401/190 without one, 400/100 with a wrong one).  Each method keeps the platform's budget
over a rolling window (``limit`` calls in ``window`` seconds, both settable): past it, 429
with ``Retry-After``.

Switches: ``media_url`` (where ``GET /media/<id>`` says the file is), ``corrupt`` (downloads
that do not match their hash).  Records: ``sent`` (message payloads, in order, with ``at`` times), ``statuses``,
``polls`` (times and offsets), ``uploads``, ``downloads``, ``limited`` (429s given).
Failure injection: ``fail_next(method, status, code, times=1, retry_after=None)`` (status
200: a malformed JSON answer) where method is ``updates``, ``messages``, ``statuses``, ``media`` or ``media_get``.
"""

from __future__ import annotations

import asyncio
import base64
import collections
import hashlib
import itertools
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

CREATOR = "user:50972923564215"
AGENT_ID = "1098765432101"
ACCEPTED = {
    "image/jpeg": 5 * 1024 * 1024,
    "image/png": 5 * 1024 * 1024,
    "image/webp": 500_000,
    "video/mp4": 16 * 1024 * 1024,
    "video/3gpp": 16 * 1024 * 1024,
    "audio/aac": 16 * 1024 * 1024,
    "audio/mp4": 16 * 1024 * 1024,
    "audio/mpeg": 16 * 1024 * 1024,
    "audio/amr": 16 * 1024 * 1024,
    "audio/ogg": 16 * 1024 * 1024,
    "audio/opus": 16 * 1024 * 1024,
    "application/pdf": 16 * 1024 * 1024,
    "text/plain": 16 * 1024 * 1024,
    "application/octet-stream": 16 * 1024 * 1024,
}


@dataclass
class Media:
    data: bytes
    mime: str
    filename: str = ""


@dataclass
class Fail:
    status: int
    code: int
    retry_after: float | None = None


@dataclass
class Sent:
    payload: dict[str, Any]
    at: float
    id: str

    @property
    def text(self) -> str:
        return str(self.payload.get("text", {}).get("body", ""))


@dataclass
class World:
    updates: list[tuple[int, str, dict[str, Any]]] = field(default_factory=list)  # seq, kind, obj


def _error(status: int, code: int, message: str, headers: dict | None = None) -> web.Response:
    body = {
        "error": {
            "message": message,
            "type": "OAuthException",
            "code": code,
            "error_data": {"messaging_product": "whatsapp", "details": message},
            "fbtrace_id": "Afake",
        }
    }
    return web.json_response(body, status=status, headers=headers)


class FakeWhatsApp:
    def __init__(
        self,
        key: str = "test-wa-key",
        *,
        limit: int = 12,
        poll_limit: int = 15,
        window: float = 60.0,
    ) -> None:
        self.key = key
        self.limit, self.poll_limit, self.window = limit, poll_limit, window
        self.world = World()
        self._seq = itertools.count(1)
        self._new = asyncio.Event()
        self._current_poll: asyncio.Future[None] | None = None
        self.sent: list[Sent] = []
        self.statuses: list[tuple[float, dict[str, Any]]] = []
        self.polls: list[tuple[float, int | None, int]] = []  # (time, offset, HTTP status)
        self.uploads: list[Media] = []
        self.downloads: list[str] = []
        self.limited: list[str] = []
        self.media: dict[str, Media] = {}
        self.media_url = ""  # set: GET /media/<id> answers this URL (a host it should not be)
        self.corrupt = False  # True: downloads serve bytes that do not match their hash
        self._fails: dict[str, collections.deque[Fail]] = collections.defaultdict(collections.deque)
        self._calls: dict[str, collections.deque[float]] = collections.defaultdict(
            collections.deque
        )
        self._runner: web.AppRunner | None = None
        self.port = 0

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        app = web.Application(client_max_size=32 * 1024 * 1024)
        app.router.add_get("/agent/v1/updates", self._updates)
        app.router.add_post("/agent/v1/messages", self._messages)
        app.router.add_post("/agent/v1/statuses", self._statuses)
        app.router.add_post("/agent/v1/media", self._upload)
        app.router.add_get("/agent/v1/media/{id}", self._media_info)
        app.router.add_get("/files/{id}", self._download)
        self._runner = web.AppRunner(app, shutdown_timeout=0.5)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def __aenter__(self) -> FakeWhatsApp:
        await self.start()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.stop()

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self.port}/agent/v1"

    # ------------------------------------------------------------------ the world
    def _add(self, kind: str, obj: dict[str, Any]) -> int:
        seq = next(self._seq)
        self.world.updates.append((seq, kind, obj))
        self._new.set()
        return seq

    def inject(self, msg: dict[str, Any]) -> str:
        """Any message object (raw, as the platform sends it); its id."""
        msg.setdefault("from", CREATOR)
        msg.setdefault("id", f"wamid.{uuid.uuid4().hex}")
        msg.setdefault("timestamp", str(int(time.time())))
        self._add("message", msg)
        return str(msg["id"])

    def inject_text(self, text: str, **kw: Any) -> str:
        return self.inject({"type": "text", "text": {"body": text}, **kw})

    def inject_media(self, mtype: str, data: bytes, mime: str, **extra: Any) -> str:
        media_id = str(uuid.uuid4())
        self.media[media_id] = Media(data, mime)
        obj = {
            "id": media_id,
            "mime_type": mime,
            "sha256": base64.b64encode(hashlib.sha256(data).digest()).decode(),
            **extra,
        }
        return self.inject({"type": mtype, mtype: obj})

    def inject_status(self, wamid: str, status: str = "read") -> None:
        self._add(
            "status",
            {
                "id": wamid,
                "status": status,
                "recipient_id": CREATOR,
                "timestamp": str(int(time.time())),
            },
        )

    def fail_next(
        self,
        method: str,
        status: int,
        code: int = 0,
        *,
        times: int = 1,
        retry_after: float | None = None,
    ) -> None:
        for _ in range(times):
            self._fails[method].append(Fail(status, code, retry_after))

    @property
    def poll_waiting(self) -> bool:
        """A long poll is held open, waiting for an update (a newer one would replace it)."""
        return self._current_poll is not None and not self._current_poll.done()

    async def wait_for_sent(self, n: int, timeout: float = 15.0) -> list[Sent]:
        deadline = time.monotonic() + timeout
        while len(self.sent) < n:
            if time.monotonic() > deadline:
                raise AssertionError(f"{len(self.sent)} messages sent, expected {n}")
            await asyncio.sleep(0.02)
        return self.sent

    # ------------------------------------------------------------------ checks
    def _auth(self, request: web.Request) -> web.Response | None:
        header = request.headers.get("Authorization", "")
        if not header.startswith("Bearer ") or not header[7:]:
            return _error(401, 190, "Invalid OAuth access token")
        if header[7:] != self.key:
            return _error(400, 100, "Invalid parameter")
        return None

    def _gate(self, request: web.Request, method: str) -> web.Response | None:
        denied = self._auth(request)
        if denied is not None:
            return denied
        if self._fails[method]:
            f = self._fails[method].popleft()
            if f.status == 200:  # a malformed answer
                return web.Response(text='{"object": "page"', content_type="application/json")
            headers = {"Retry-After": str(f.retry_after)} if f.retry_after is not None else None
            return _error(f.status, f.code, "injected", headers)
        limit = self.poll_limit if method == "updates" else self.limit
        calls, now = self._calls[method], time.monotonic()
        # a little slack: a call leaves the client just before it arrives here
        while calls and now - calls[0] >= self.window * 0.9:
            calls.popleft()
        if len(calls) >= limit:
            self.limited.append(method)
            retry = max(1, int(self.window - (now - calls[0])) + 1)
            return _error(429, 130429, "Rate limit hit", {"Retry-After": str(retry)})
        calls.append(now)
        return None

    # ------------------------------------------------------------------ endpoints
    def _answer(self, offset: int | None, limit: int) -> dict[str, Any] | None:
        if offset is None:
            return None
        items = [u for u in self.world.updates if u[0] > offset][:limit]
        if not items:
            return None
        msgs = [o for _, k, o in items if k == "message"]
        sts = [o for _, k, o in items if k == "status"]
        value = {
            "messaging_product": "whatsapp",
            "contacts": [{"wa_id": CREATOR, "profile": {"name": "Alex"}}],
            "messages": msgs,
            "statuses": sts,
        }
        return {
            "object": "whatsapp_agent_platform",
            "entry": [{"id": AGENT_ID, "changes": [{"field": "messages", "value": value}]}],
            "next_offset": items[-1][0],
        }

    async def _updates(self, request: web.Request) -> web.StreamResponse:
        q = request.query
        offset = int(q["offset"]) if "offset" in q else None
        denied = self._gate(request, "updates")
        if denied is not None:
            self.polls.append((time.monotonic(), offset, denied.status))
            return denied
        timeout = max(0, min(25, int(q.get("timeout", "0") or 0)))
        limit = max(1, min(100, int(q.get("limit", "50") or 50)))
        if offset is None:  # the head now: only what comes after this request
            offset = self.world.updates[-1][0] if self.world.updates else 0
        if self._current_poll is not None and not self._current_poll.done():
            self._current_poll.set_result(None)  # the older poll is replaced
        mine: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._current_poll = mine
        deadline = time.monotonic() + timeout
        while True:
            body = self._answer(offset, limit)
            if body is not None:
                self.polls.append((time.monotonic(), offset, 200))
                return web.json_response(body)
            left = deadline - time.monotonic()
            if left <= 0:
                self.polls.append((time.monotonic(), offset, 204))
                return web.Response(status=204)
            self._new.clear()
            waiter = asyncio.ensure_future(self._new.wait())
            await asyncio.wait({waiter, mine}, timeout=left, return_when="FIRST_COMPLETED")
            waiter.cancel()
            if mine.done():
                self.polls.append((time.monotonic(), offset, 409))
                return _error(409, 1752041, "Duplicate request")

    async def _messages(self, request: web.Request) -> web.Response:
        denied = self._gate(request, "messages")
        if denied is not None:
            return denied
        body = await request.json()
        if body.get("messaging_product") != "whatsapp" or not isinstance(body.get("to"), str):
            return _error(400, 131009, "Parameter value is not valid")
        if body["to"] != CREATOR:
            return _error(403, 131005, "Access denied")
        quote = (body.get("context") or {}).get("message_id")
        known = {o.get("id") for _, k, o in self.world.updates if k == "message"}
        if quote is not None and quote not in known | {s.id for s in self.sent}:
            return _error(400, 131009, "context.message_id")
        mtype = body.get("type")
        if mtype == "text":
            text = body.get("text", {}).get("body", "")
            if not text or len(text.encode("utf-16-le")) // 2 > 4096:
                return _error(400, 100, "text.body")
        elif mtype in ("image", "video", "audio", "document", "sticker"):
            obj = body.get(mtype) or {}
            if obj.get("id") not in self.media:
                return _error(400, 131009, f"No media found for id {obj.get('id')}")
        else:
            return _error(400, 131009, "Parameter value is not valid")
        wamid = f"wamid.out.{uuid.uuid4().hex}"
        self.sent.append(Sent(body, time.monotonic(), wamid))
        return web.json_response(
            {
                "messaging_product": "whatsapp",
                "contacts": [{"input": body["to"], "wa_id": CREATOR}],
                "messages": [{"id": wamid}],
            }
        )

    async def _statuses(self, request: web.Request) -> web.Response:
        denied = self._gate(request, "statuses")
        if denied is not None:
            return denied
        body = await request.json()
        known = {o.get("id") for _, k, o in self.world.updates if k == "message"}
        if body.get("message_id") not in known:
            return _error(400, 131009, "Parameter value is not valid")
        self.statuses.append((time.monotonic(), body))
        return web.json_response({"success": True})

    async def _upload(self, request: web.Request) -> web.Response:
        denied = self._gate(request, "media")
        if denied is not None:
            return denied
        form = await request.post()
        part = form.get("file")
        if form.get("messaging_product") != "whatsapp" or not isinstance(part, web.FileField):
            return _error(400, 131009, "Parameter value is not valid")
        data = part.file.read()
        mime = str(form.get("type") or part.content_type)
        if mime not in ACCEPTED:
            return _error(400, 131053, f"Unsupported media type {mime}")
        if len(data) > ACCEPTED[mime]:
            return _error(400, 131053, f"Media too large: {len(data)} bytes")
        media_id = str(uuid.uuid4())
        self.media[media_id] = Media(data, mime, part.filename or "")
        self.uploads.append(self.media[media_id])
        return web.json_response({"id": media_id})

    async def _media_info(self, request: web.Request) -> web.Response:
        denied = self._gate(request, "media_get")
        if denied is not None:
            return denied
        m = self.media.get(request.match_info["id"])
        if m is None:
            return _error(400, 100, "No media found")
        return web.json_response(
            {
                "url": self.media_url
                or f"http://127.0.0.1:{self.port}/files/{request.match_info['id']}",
                "mime_type": m.mime,
                "sha256": hashlib.sha256(m.data).hexdigest(),
                "file_size": len(m.data),
                "id": request.match_info["id"],
                "messaging_product": "whatsapp",
            }
        )

    async def _download(self, request: web.Request) -> web.Response:
        denied = self._auth(request)
        if denied is not None:
            return _error(401, 190, "Invalid OAuth access token")
        m = self.media.get(request.match_info["id"])
        if m is None:
            return _error(404, 100, "No media found")
        self.downloads.append(request.match_info["id"])
        return web.Response(body=m.data + (b"!" if self.corrupt else b""), content_type=m.mime)
