"""OpenAI-compatible HTTP channel: ``POST /v1/chat/completions``, ``GET /v1/models`` and
``GET /healthz``.

Each request becomes one inbound message; the reply is collected from ``send`` calls
until the core signals ``turn_done``.  The ``user`` field names the conversation.

Only the owner may drive it (SPEC §9.4).  Before any route runs, a middleware refuses:

* a ``Host`` header that is neither loopback nor the configured listen host (DNS rebinding);
* an ``Origin`` header not listed in ``allowed_origins`` (a web page the owner has open),
  and answers CORS preflights only for listed origins;
* a missing or wrong bearer token (everything but ``/healthz``);
* a POST whose body is not ``Content-Type: application/json`` (a "simple" cross-site
  request needs no preflight, a JSON one does), or is larger than ``MAX_BODY``.

Every error is OpenAI's JSON shape ``{"error": {"message", "type", "code"}}``.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import time
import uuid
from collections.abc import Iterable

from aiohttp import web

from channels.base import (
    Capabilities,
    Channel,
    ChannelError,
    InboundMessage,
    InboundSink,
    OutboundMessage,
)
from channels.util import is_loopback

log = logging.getLogger("chela.http")

MAX_BODY = 4 * 1024 * 1024
PREFLIGHT_MAX_AGE = 600
# request storage key: the allowed Origin this request came from (set by the guard)
_CORS_KEY = (
    web.RequestKey("cors_origin", str) if hasattr(web, "RequestKey") else "chela.cors_origin"
)


class HttpChannel(Channel):
    name = "http"
    capabilities = Capabilities(max_text=1_000_000, proactive=False)

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 8787,
        token: str = "",
        model_name: str = "chela",
        reply_timeout: float = 600.0,
        allowed_origins: Iterable[str] = (),
        token_hint: str = "",
    ):
        self.host, self.port, self.token = host, port, token
        self.model_name = model_name
        self.reply_timeout = reply_timeout
        self.allowed_origins = {_norm_origin(o) for o in allowed_origins if o}
        self.token_hint = token_hint  # where the owner finds the token, for the 401 message
        self._runner: web.AppRunner | None = None
        self._sink: InboundSink | None = None
        self._pending: dict[str, tuple[asyncio.Future, list[str]]] = {}
        self.bound_port: int | None = None

    async def start(self, sink: InboundSink) -> None:
        if not self.token:
            raise ChannelError(
                f"refusing to serve the HTTP API on {self.host}:{self.port} without a token"
            )
        self._sink = sink
        app = web.Application(client_max_size=MAX_BODY, middlewares=[self._guard])
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/v1/models", self._models)
        app.router.add_post("/v1/chat/completions", self._completions)
        app.on_response_prepare.append(_add_cors_headers)
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
        log.info("http channel listening on %s", self._base_url())

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

    # -------------------------------------------------------------------------- guard
    def _base_url(self) -> str:
        host = (
            self.host
            if is_loopback(self.host) or self.host not in ("0.0.0.0", "::", "")
            else "127.0.0.1"
        )
        if ":" in host:
            host = f"[{host}]"
        return f"http://{host}:{self.bound_port or self.port}"

    def _host_allowed(self, header: str) -> bool:
        host = _host_of(header)
        if not host:
            return False
        return is_loopback(host) or host == self.host.lower().strip("[]")

    def _authorized(self, request: web.Request) -> bool:
        scheme, _, value = request.headers.get("Authorization", "").partition(" ")
        return (
            bool(self.token)
            and scheme.lower() == "bearer"
            and hmac.compare_digest(value.strip().encode(), self.token.encode())
        )

    @web.middleware
    async def _guard(self, request: web.Request, handler) -> web.StreamResponse:
        try:
            refusal = self._refusal(request)
            if refusal is not None:
                return refusal
            return await handler(request)
        except web.HTTPRequestEntityTooLarge:
            return _too_large()
        except web.HTTPException as e:
            if e.status < 400:
                raise
            return _error(e.status, e.reason, "invalid_request_error")

    def _refusal(self, request: web.Request) -> web.StreamResponse | None:
        """The response that refuses this request, or None when the route may run."""
        host = request.headers.get("Host", "")
        if not self._host_allowed(host):
            shown = f"the Host header {host!r} is" if host else "a request without a Host header is"
            return _error(403, f"{shown} not allowed; use {self._base_url()}", "forbidden_host")
        origin = request.headers.get("Origin")
        if origin is not None:
            if _norm_origin(origin) not in self.allowed_origins:
                return _error(
                    403,
                    f"the origin {origin!r} is not allowed; add it to "
                    "channels.http.allowed_origins to let that page call the API",
                    "forbidden_origin",
                )
            request[_CORS_KEY] = origin
            if request.method == "OPTIONS":
                return self._preflight(request)
        route_error = request.match_info.http_exception
        if request.path == "/healthz" and route_error is None:
            return None  # liveness needs no token
        if not self._authorized(request):
            where = f" (the token is {self.token_hint})" if self.token_hint else ""
            resp = _error(
                401,
                f"invalid or missing bearer token; send 'Authorization: Bearer <token>'{where}",
                "invalid_api_key",
            )
            resp.headers["WWW-Authenticate"] = 'Bearer realm="chela"'
            return resp
        if isinstance(route_error, web.HTTPMethodNotAllowed):
            allowed = ", ".join(sorted(route_error.allowed_methods))
            resp = _error(
                405,
                f"{request.method} is not allowed on {request.path}; use {allowed}",
                "method_not_allowed",
            )
            resp.headers["Allow"] = allowed
            return resp
        if route_error is not None:
            return _error(
                404,
                f"no route {request.method} {request.path}; the API serves "
                "POST /v1/chat/completions, GET /v1/models and GET /healthz",
                "not_found",
            )
        if request.method == "POST":
            if request.content_type.lower() != "application/json":
                got = request.headers.get("Content-Type", "none")
                return _error(
                    415,
                    f"the Content-Type {got!r} is not accepted; send Content-Type: application/json",
                    "unsupported_media_type",
                )
            if request.content_length is not None and request.content_length > MAX_BODY:
                return _too_large()
        return None

    def _preflight(self, request: web.Request) -> web.Response:
        method = request.headers.get("Access-Control-Request-Method", "")
        allowed = sorted(self._route_methods(request))
        if not allowed or (method and method.upper() not in allowed):
            return _error(
                405,
                f"{method or 'this method'} is not allowed on {request.path}",
                "method_not_allowed",
            )
        return web.Response(
            status=204,
            headers={
                "Access-Control-Allow-Methods": ", ".join(allowed),
                "Access-Control-Allow-Headers": "Authorization, Content-Type",
                "Access-Control-Max-Age": str(PREFLIGHT_MAX_AGE),
            },
        )

    @staticmethod
    def _route_methods(request: web.Request) -> set[str]:
        exc = request.match_info.http_exception
        if isinstance(exc, web.HTTPMethodNotAllowed):
            return {m for m in exc.allowed_methods if m != "HEAD"}
        if exc is not None:
            return set()
        return {request.match_info.route.method}

    # -------------------------------------------------------------------------- routes
    async def _healthz(self, request: web.Request) -> web.Response:
        return web.json_response({"ok": True})

    async def _models(self, request: web.Request) -> web.Response:
        return web.json_response(
            {
                "object": "list",
                "data": [{"id": self.model_name, "object": "model", "owned_by": "chela"}],
            }
        )

    async def _completions(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()  # over client_max_size raises 413, turned into JSON by _guard
        try:
            body = json.loads(raw)
        except RecursionError:
            return _error(400, "the body is nested too deeply", "invalid_request_error")
        except (json.JSONDecodeError, UnicodeDecodeError, ValueError):
            return _error(400, "the body is not valid JSON", "invalid_request_error")
        if not isinstance(body, dict):
            return _error(
                400, "the body must be a JSON object with a messages list", "invalid_request_error"
            )
        text = _last_user_text(body.get("messages"))
        if not text:
            return _error(
                400,
                "messages must end with a user message whose content is a string or a list of "
                '{"type": "text", "text": "..."} parts',
                "invalid_request_error",
            )
        user = body.get("user")
        if user is not None and not isinstance(user, str):
            return _error(400, "user must be a string", "invalid_request_error")
        user = (user or "")[:128]
        rid = uuid.uuid4().hex
        chat_id = f"req-{rid}"
        fut: asyncio.Future = asyncio.get_running_loop().create_future()
        self._pending[chat_id] = (fut, [])
        msg = InboundMessage(
            channel="http",
            chat_id=chat_id,
            sender_id=user,
            sender_name=user or "http client",
            text=text,
            message_id=rid,
            chat_type="direct",
            timestamp=time.time(),
            raw_id=rid,
            peer_session=bool(user),
        )
        try:
            assert self._sink is not None
            await self._sink(msg)
            content = await asyncio.wait_for(fut, self.reply_timeout)
        except TimeoutError:
            return _error(504, "the assistant did not answer in time", "timeout")
        finally:
            self._pending.pop(chat_id, None)
        if body.get("stream"):
            return await self._stream(request, rid, content)
        return web.json_response(
            {
                "id": f"chatcmpl-{rid}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": self.model_name,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": content},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
            }
        )

    async def _stream(self, request: web.Request, rid: str, content: str) -> web.StreamResponse:
        resp = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        await resp.prepare(request)
        created = int(time.time())

        def chunk(delta: dict, finish: str | None = None) -> bytes:
            data = {
                "id": f"chatcmpl-{rid}",
                "object": "chat.completion.chunk",
                "created": created,
                "model": self.model_name,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }
            return f"data: {json.dumps(data, ensure_ascii=False)}\n\n".encode()

        await resp.write(chunk({"role": "assistant", "content": ""}))
        for i in range(0, len(content), 256):
            await resp.write(chunk({"content": content[i : i + 256]}))
        await resp.write(chunk({}, "stop"))
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp


async def _add_cors_headers(request: web.Request, response: web.StreamResponse) -> None:
    """CORS headers go only on answers to an origin the owner listed (set by the guard)."""
    origin = request.get(_CORS_KEY)
    if origin:
        response.headers["Access-Control-Allow-Origin"] = origin
        response.headers["Vary"] = "Origin"


def _error(status: int, message: str, code: str) -> web.Response:
    kind = "invalid_request_error" if status < 500 else "server_error"
    return web.json_response(
        {"error": {"message": message, "type": kind, "code": code}}, status=status
    )


def _too_large() -> web.Response:
    return _error(
        413,
        f"the request body is over {MAX_BODY // (1024 * 1024)} MB; send a shorter conversation",
        "request_too_large",
    )


def _norm_origin(origin: str) -> str:
    return origin.strip().rstrip("/").lower()


def _host_of(header: str) -> str:
    """The host part of a ``Host`` header, lower-cased: ``"[::1]:80"`` → ``"::1"``."""
    h = header.strip().lower()
    if h.startswith("["):
        end = h.find("]")
        if end < 0 or (h[end + 1 :] and not (h[end + 1] == ":" and h[end + 2 :].isdigit())):
            return ""
        return h[1:end]
    name, sep, port = h.rpartition(":")
    if sep:
        if not port.isdigit() or ":" in name:
            return ""
        h = name
    return h.rstrip(".")


def _last_user_text(messages) -> str | None:
    if not isinstance(messages, list):
        return None
    for m in reversed(messages):
        if isinstance(m, dict) and m.get("role") == "user":
            c = m.get("content")
            if isinstance(c, str):
                return c
            if isinstance(c, list):
                parts = [
                    p.get("text") for p in c if isinstance(p, dict) and p.get("type") == "text"
                ]
                if not all(isinstance(t, str) for t in parts):
                    return None
                return "\n".join(parts) if parts else None
            return None
    return None
