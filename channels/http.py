"""OpenAI-compatible HTTP channel: ``POST /v1/chat/completions`` and ``GET /healthz``.

Each request becomes one inbound message; the reply is collected from ``send`` calls
until the core signals ``turn_done``.  The ``user`` field names the conversation.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import time
import uuid

from aiohttp import web

from channels.base import Capabilities, Channel, ChannelError, InboundMessage, InboundSink, OutboundMessage
from channels.util import is_loopback

log = logging.getLogger("chela.http")

MAX_BODY = 4 * 1024 * 1024


class HttpChannel(Channel):
    name = "http"
    capabilities = Capabilities(max_text=1_000_000, proactive=False)

    def __init__(self, *, host: str = "127.0.0.1", port: int = 8787, token: str = "", model_name: str = "chela",
                 reply_timeout: float = 600.0):
        self.host, self.port, self.token = host, port, token
        self.model_name = model_name
        self.reply_timeout = reply_timeout
        self._runner: web.AppRunner | None = None
        self._sink: InboundSink | None = None
        self._pending: dict[str, tuple[asyncio.Future, list[str]]] = {}
        self.bound_port: int | None = None

    async def start(self, sink: InboundSink) -> None:
        if not is_loopback(self.host) and not self.token:
            raise ChannelError(f"refusing to listen on {self.host}:{self.port} without a token "
                               "(set channels.http.token_env, or listen on 127.0.0.1)")
        self._sink = sink
        app = web.Application(client_max_size=MAX_BODY)
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/v1/models", self._models)
        app.router.add_post("/v1/chat/completions", self._completions)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        try:
            await site.start()
        except OSError as e:
            await self._runner.cleanup()
            self._runner = None
            raise ChannelError(f"cannot listen on {self.host}:{self.port}: {e.strerror}") from None
        self.bound_port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        log.info("http channel listening on http://%s:%d", self.host, self.bound_port)

    async def stop(self) -> None:
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()
        for fut, _ in self._pending.values():
            if not fut.done():
                fut.cancel()

    async def send(self, msg: OutboundMessage) -> list[str]:
        entry = self._pending.get(msg.chat_id)
        if entry is None:
            raise ChannelError(f"no open HTTP request for {msg.chat_id}")
        # no media capability: the core has already turned attachments into text
        entry[1].append(msg.text.strip())
        return [msg.chat_id]

    async def turn_done(self, chat_id: str, message_id: str) -> None:
        entry = self._pending.get(chat_id)
        if entry and not entry[0].done():
            entry[0].set_result("\n\n".join(p for p in entry[1] if p))

    # -------------------------------------------------------------------------- routes
    def _authorized(self, request: web.Request) -> bool:
        if not self.token:
            return True
        got = request.headers.get("Authorization", "")
        scheme, _, value = got.partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(value.strip().encode(), self.token.encode())

    async def _healthz(self, request: web.Request) -> web.Response:
        return web.json_response({"ok": True})

    async def _models(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return _error(401, "invalid or missing bearer token", "invalid_api_key")
        return web.json_response({"object": "list", "data": [{"id": self.model_name, "object": "model", "owned_by": "chela"}]})

    async def _completions(self, request: web.Request) -> web.StreamResponse:
        if not self._authorized(request):
            return _error(401, "invalid or missing bearer token", "invalid_api_key")
        try:
            body = await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError, ValueError):
            return _error(400, "the body is not valid JSON", "invalid_request_error")
        text = _last_user_text(body.get("messages") if isinstance(body, dict) else None)
        if text is None:
            return _error(400, "messages must contain a user message with text content", "invalid_request_error")
        user = str(body.get("user") or "")[:128]
        rid = uuid.uuid4().hex
        chat_id = f"req-{rid}"
        fut: asyncio.Future = asyncio.get_running_loop().create_future()
        self._pending[chat_id] = (fut, [])
        msg = InboundMessage(channel="http", chat_id=chat_id, sender_id=user, sender_name=user or "http client",
                             text=text, message_id=rid, chat_type="direct", timestamp=time.time(), raw_id=rid,
                             peer_session=bool(user))
        try:
            assert self._sink is not None
            await self._sink(msg)
            content = await asyncio.wait_for(fut, self.reply_timeout)
        except asyncio.TimeoutError:
            return _error(504, "the assistant did not answer in time", "timeout")
        finally:
            self._pending.pop(chat_id, None)
        if body.get("stream"):
            return await self._stream(request, rid, content)
        return web.json_response({
            "id": f"chatcmpl-{rid}", "object": "chat.completion", "created": int(time.time()),
            "model": self.model_name,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
        })

    async def _stream(self, request: web.Request, rid: str, content: str) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await resp.prepare(request)
        created = int(time.time())

        def chunk(delta: dict, finish: str | None = None) -> bytes:
            data = {"id": f"chatcmpl-{rid}", "object": "chat.completion.chunk", "created": created,
                    "model": self.model_name, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
            return f"data: {json.dumps(data, ensure_ascii=False)}\n\n".encode()

        await resp.write(chunk({"role": "assistant", "content": ""}))
        for i in range(0, len(content), 256):
            await resp.write(chunk({"content": content[i:i + 256]}))
        await resp.write(chunk({}, "stop"))
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp


def _error(status: int, message: str, code: str) -> web.Response:
    return web.json_response({"error": {"message": message, "type": code, "code": code}}, status=status)


def _last_user_text(messages) -> str | None:
    if not isinstance(messages, list):
        return None
    for m in reversed(messages):
        if isinstance(m, dict) and m.get("role") == "user":
            c = m.get("content")
            if isinstance(c, str):
                return c
            if isinstance(c, list):
                parts = [p.get("text", "") for p in c if isinstance(p, dict) and p.get("type") == "text"]
                return "\n".join(parts) if parts else None
            return None
    return None
