"""OpenAI-compatible HTTP channel: ``POST /v1/chat/completions``, ``GET /v1/models``,
``GET /v1/models/{id}`` and ``GET /healthz`` (SPEC §13).

Each request becomes one inbound message; the reply is collected from ``send`` calls
until the core signals ``turn_done``.  The adapter only validates and translates: the
client's system messages, conversation, tools and model parameters travel to the core in
``InboundMessage.api`` (bot.api_turn decides what they do); the reply's usage, client
tool calls and finish reason come back in ``OutboundMessage.api``.  ``user`` names a
server-side conversation; without it a request is stateless.

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
import base64
import binascii
import dataclasses
import hashlib
import hmac
import json
import logging
import mimetypes
import re
import time
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any
from urllib.parse import unquote_to_bytes

from aiohttp import web

from channels.base import (
    Capabilities,
    Channel,
    ChannelError,
    InboundMessage,
    InboundSink,
    MediaItem,
    MediaTooLarge,
    OutboundMessage,
)
from channels.util import capped_file, is_loopback

log = logging.getLogger("chela.http")

# a photo of media.max_download_mb (20 MB) as a base64 data URL is ~27 MB (SPEC §11); the body
# is read only after the token check
MAX_BODY = 32 * 1024 * 1024
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
        self._failed: dict[str, str] = {}  # chat_id -> the error kind of its reply
        # chat_id -> the API part of its reply (OutboundMessage.api: usage, the client's
        # tool calls, finish_reason), read by _completions and _stream
        self._answers: dict[str, dict[str, Any]] = {}
        self._closing = False  # stop() began: new requests get 503
        self._created = int(time.time())
        # chat_id -> the event sink of a ``stream: true`` request (live_stream, _stream)
        self._live: dict[str, Callable[[str, Any], None]] = {}
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
        app.router.add_get("/v1/models/{model_id:.+}", self._model)
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
        # waiting callers are answered 503 first: the server's cleanup waits for them
        self._closing = True
        for fut, _ in self._pending.values():
            if not fut.done():
                fut.cancel()
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()

    async def send(self, msg: OutboundMessage) -> list[str]:
        entry = self._pending.get(msg.chat_id)
        if entry is None:
            raise ChannelError(f"no open HTTP request for {msg.chat_id}")
        # no media capability: the core has already turned attachments into text
        entry[1].append(msg.text.strip())
        if msg.error:
            self._failed[msg.chat_id] = msg.error
        if msg.api:
            self._answers[msg.chat_id] = msg.api
        return [msg.chat_id]

    async def fetch_media(self, item: MediaItem, dest_dir: Path, max_bytes: int) -> MediaItem:
        """Decode an ``image_url`` data URL into ``dest_dir`` (0600, at most ``max_bytes``)."""
        if not item.ref.startswith("data:"):
            return item
        if len(item.ref) * 3 // 4 > max_bytes + 4:
            raise MediaTooLarge(f"http: {item.name} is over {max_bytes} bytes")
        try:
            data = _decode_data_url(item.ref)
        except (ValueError, binascii.Error) as e:
            raise ChannelError(f"http: {item.name} is not a valid data URL ({e})") from None
        dest = Path(dest_dir).absolute() / f"http_{uuid.uuid4().hex[:12]}_{item.name}"
        with capped_file(dest, max_bytes, f"http: {item.name}") as out:
            out.write(data)
        return dataclasses.replace(item, target=str(dest), ref="")

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
                "POST /v1/chat/completions, GET /v1/models, GET /v1/models/{id} and GET /healthz",
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

    def _model_card(self) -> dict[str, Any]:
        return {
            "id": self.model_name,
            "object": "model",
            "created": self._created,
            "owned_by": "chela",
        }

    async def _models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [self._model_card()]})

    async def _model(self, request: web.Request) -> web.Response:
        """``GET /v1/models/{id}``: the one model there is; 404 for any other id (chat
        completions serve any model name: clients hard-code names)."""
        model_id = request.match_info["model_id"]
        if model_id != self.model_name:
            return _error(
                404,
                f"the model {model_id!r} does not exist; this server serves {self.model_name!r}",
                "model_not_found",
            )
        return web.json_response(self._model_card())

    async def _completions(self, request: web.Request) -> web.StreamResponse:
        if self._closing:
            return _shutting_down()
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
        parsed = _parse_request(body)
        if isinstance(parsed, str):
            return _error(400, parsed, "invalid_request_error")
        text, images, api = parsed
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
            attachments=images,
            timestamp=time.time(),
            raw_id=rid,
            peer_session=bool(user),
            api=api,
        )
        if body.get("stream"):
            try:  # _stream may read self._answers[chat_id] (usage, tool calls, finish)
                return await self._stream(request, body, msg, fut)
            finally:
                self._answers.pop(chat_id, None)
        try:
            assert self._sink is not None
            await self._sink(msg)
            content = await asyncio.wait_for(fut, self.reply_timeout)
        except TimeoutError:
            return _error(504, "the assistant did not answer in time", "timeout")
        except asyncio.CancelledError:
            if self._closing and fut.cancelled():
                return _shutting_down()
            raise
        finally:
            self._pending.pop(chat_id, None)
            failed = self._failed.pop(chat_id, "")
            answer = self._answers.pop(chat_id, {})
        if failed:  # never a 200 whose content is an error message (SPEC §13)
            return _failure(failed, content)
        calls = answer.get("tool_calls") or []
        message: dict[str, Any] = {"role": "assistant", "content": content or None}
        if calls:  # the client's own tools: it runs them and sends the results back
            message["tool_calls"] = calls
        else:
            message["content"] = content
        model = body.get("model")
        return web.json_response(
            {
                "id": f"chatcmpl-{rid}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": model if isinstance(model, str) and model else self.model_name,
                "choices": [
                    {
                        "index": 0,
                        "message": message,
                        "finish_reason": answer.get("finish_reason") or "stop",
                    }
                ],
                "usage": answer.get("usage")
                or {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
            }
        )

    def live_stream(self, chat_id: str) -> Callable[[str, Any], None] | None:
        return self._live.get(chat_id)

    async def _stream(
        self, request: web.Request, body: dict, msg: InboundMessage, fut: asyncio.Future
    ) -> web.StreamResponse:
        """``stream: true`` (SPEC §12, §13): the reply's text as the model writes it.

        The core feeds ``live_stream``'s sink with visible text (bot.streaming.StreamText),
        a ``step`` when a model call follows tool calls (the next text starts after a blank
        line) and each call's usage.  The SSE response opens with the first text, so a turn
        that fails before any still answers with a JSON error (502, 429 for the budget);
        a failure after text went out ends the stream with an ``error`` event.  When the
        turn ends, what the final reply adds to the streamed text is sent (all of it, after
        a blank line, in the rare case it does not continue the streamed text), then the
        finish chunk and, with ``stream_options.include_usage``, a usage chunk with the
        provider's token counts."""
        chat_id, rid = msg.chat_id, msg.message_id
        opts = body.get("stream_options")
        include_usage = isinstance(opts, dict) and opts.get("include_usage") is True
        events: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        self._live[chat_id] = lambda kind, value: events.put_nowait((kind, value))
        fut.add_done_callback(lambda _f: events.put_nowait(("done", None)))
        created = int(time.time())
        usage: dict[str, int] = {}
        resp: web.StreamResponse | None = None
        segment = ""  # text sent for the current model call
        gap = ""  # goes before the next text: a model call after tool calls

        def chunk(delta: dict | None, finish: str | None = None, **extra: Any) -> bytes:
            data: dict[str, Any] = {
                "id": f"chatcmpl-{rid}",
                "object": "chat.completion.chunk",
                "created": created,
                "model": self.model_name,
                "choices": []
                if delta is None
                else [{"index": 0, "delta": delta, "finish_reason": finish}],
                **extra,
            }
            return f"data: {json.dumps(data, ensure_ascii=False)}\n\n".encode()

        async def opened() -> web.StreamResponse:
            nonlocal resp
            if resp is None:
                resp = web.StreamResponse(
                    headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
                )
                await resp.prepare(request)
                await resp.write(chunk({"role": "assistant", "content": ""}))
            return resp

        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.reply_timeout
        try:
            assert self._sink is not None
            await self._sink(msg)
            while True:
                kind, value = await asyncio.wait_for(events.get(), max(0.0, deadline - loop.time()))
                if kind == "done":
                    break
                if kind == "usage":
                    for k, v in (value or {}).items():
                        if isinstance(v, int):
                            usage[k] = usage.get(k, 0) + v
                elif kind == "step":
                    gap, segment = ("\n\n" if segment or gap else ""), ""
                elif kind == "text" and value:
                    out = await opened()
                    await out.write(chunk({"content": gap + value}))
                    segment += value
                    gap = ""
        except TimeoutError:
            if resp is None:
                return _error(504, "the assistant did not answer in time", "timeout")
            error = {"message": "the assistant did not answer in time", "type": "server_error"}
            await resp.write(chunk(None, error={**error, "code": "timeout"}))
            await resp.write(b"data: [DONE]\n\n")
            return resp
        except (ConnectionError, asyncio.CancelledError):
            raise  # the client went away (or the server stops); the turn finishes unseen
        finally:
            self._live.pop(chat_id, None)
            self._pending.pop(chat_id, None)
            failed = self._failed.pop(chat_id, "")
        content = fut.result() if fut.done() and not fut.cancelled() else ""
        if failed:  # never a 200 whose content is an error message (SPEC §13)
            if resp is None:
                if failed == "budget":
                    return _error(429, content, "daily_cost_limit")
                return _error(502, content or "the model provider failed", "model_error")
            code = "daily_cost_limit" if failed == "budget" else "model_error"
            error = {"message": content or "the model provider failed", "type": "server_error"}
            await resp.write(chunk(None, error={**error, "code": code}))
            await resp.write(b"data: [DONE]\n\n")
            await resp.write_eof()
            return resp
        out = await opened()
        rest = content[len(segment) :] if content.startswith(segment) else "\n\n" + content
        if rest.strip():
            await out.write(chunk({"content": (gap if not segment else "") + rest}))
        await out.write(chunk({}, "stop"))
        if include_usage:
            u: dict[str, Any] = {
                "prompt_tokens": usage.get("prompt_tokens", 0),
                "completion_tokens": usage.get("completion_tokens", 0),
                "total_tokens": usage.get("total_tokens", 0),
            }
            if usage.get("cached_tokens"):
                u["prompt_tokens_details"] = {"cached_tokens": usage["cached_tokens"]}
            await out.write(chunk(None, usage=u))
        await out.write(b"data: [DONE]\n\n")
        await out.write_eof()
        return out


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


def _failure(kind: str, content: str) -> web.Response:
    """The answer to a turn that failed, by ``OutboundMessage.error`` kind (SPEC §13)."""
    if kind == "budget":
        return _error(429, content, "daily_cost_limit")
    if kind == "invalid_request":
        return _error(400, content, "invalid_request_error")
    return _error(502, content or "the model provider failed", "model_error")


def _shutting_down() -> web.Response:
    return _error(503, "the assistant is shutting down; try again in a moment", "shutting_down")


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


def _last_user_content(messages: Any) -> tuple[str, list[MediaItem]] | str | None:
    """(text, images) of the last user message; None when there is none or its content
    has no usable shape; an error message for a bad ``image_url`` part."""
    if not isinstance(messages, list):
        return None
    for m in reversed(messages):
        if isinstance(m, dict) and m.get("role") == "user":
            return _user_content(m.get("content"))
    return None


def _user_content(c: Any) -> tuple[str, list[MediaItem]] | str | None:
    """(text, images) of a user message's content; None when it has no usable shape; an
    error message for a bad ``image_url`` part.

    ``image_url`` parts (``{"url": ...}`` or a bare string) become image attachments: a
    ``data:`` URL is decoded by ``fetch_media`` after admission, an http(s) URL is left
    for the core to fetch (through its SSRF guard); any other scheme is refused.  Parts
    of other types are ignored."""
    if isinstance(c, str):
        return c, []
    if not isinstance(c, list):
        return None
    texts: list[str] = []
    images: list[MediaItem] = []
    for p in c:
        if not isinstance(p, dict):
            continue
        if p.get("type") == "text":
            if not isinstance(p.get("text"), str):
                return None
            texts.append(p["text"])
        elif p.get("type") == "image_url":
            ref = p.get("image_url")
            url = ref.get("url") if isinstance(ref, dict) else ref
            if not isinstance(url, str) or not url.strip():
                return "an image_url part needs a url"
            url = url.strip()
            name = f"image_{len(images) + 1}"
            if url.startswith("data:"):
                mime = url[5:].split(",", 1)[0].split(";", 1)[0].strip().lower()
                if not mime.startswith("image/"):
                    return "an image_url data URL must hold an image (data:image/...)"
                ext = mimetypes.guess_extension(mime) or ""
                images.append(MediaItem("image", "", name + ext, mime, ref=url))
            elif url.startswith(("http://", "https://")):
                images.append(MediaItem("image", url, name))
            else:
                return "an image_url must be a data: URL or an http(s) URL"
    return "\n".join(texts), images


def _plain_text(c: Any) -> str | None:
    """The text of a system, developer, assistant or tool message's content: a string,
    null, or a list of ``text`` (or ``refusal``) parts; None for any other shape."""
    if c is None:
        return ""
    if isinstance(c, str):
        return c
    if not isinstance(c, list):
        return None
    out = []
    for p in c:
        if not isinstance(p, dict):
            return None
        t = p.get("text", p.get("refusal"))
        if not isinstance(t, str):
            return None
        out.append(t)
    return "\n".join(out)


_TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _parse_params(body: dict) -> dict[str, Any] | str:
    """The model parameters a request passes on (SPEC §13), checked; or an error."""
    out: dict[str, Any] = {}
    for k in ("max_tokens", "max_completion_tokens"):
        v = body.get(k)
        if v is None:
            continue
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            return f"{k} must be a positive integer"
        out[k] = v
    for k, hi in (("temperature", 2.0), ("top_p", 1.0)):
        v = body.get(k)
        if v is None:
            continue
        if not _number(v) or not 0 <= v <= hi:
            return f"{k} must be a number from 0 to {hi:g}"
        out[k] = v
    stop = body.get("stop")
    if stop is not None:
        if isinstance(stop, str):
            stop = [stop]
        if (
            not isinstance(stop, list)
            or not 1 <= len(stop) <= 4
            or not all(isinstance(x, str) and x for x in stop)
        ):
            return "stop must be a string or a list of up to 4 strings"
        out["stop"] = stop
    seed = body.get("seed")
    if seed is not None:
        if not isinstance(seed, int) or isinstance(seed, bool):
            return "seed must be an integer"
        out["seed"] = seed
    rf = body.get("response_format")
    if rf is not None:
        if not isinstance(rf, dict) or rf.get("type") not in ("text", "json_object", "json_schema"):
            return 'response_format must be {"type": "text" | "json_object" | "json_schema", ...}'
        if rf["type"] == "json_schema" and not isinstance(rf.get("json_schema"), dict):
            return "a json_schema response_format needs a json_schema object"
        out["response_format"] = rf
    n = body.get("n")
    if n is not None and n != 1:
        return "n must be 1: the assistant gives one answer per request"
    return out


def _parse_tools(body: dict) -> tuple[list[dict], Any] | str:
    """The client's tools (OpenAI function tools) and tool_choice, checked; or an error."""
    tools = body.get("tools")
    out: list[dict] = []
    if tools is not None:
        if not isinstance(tools, list):
            return "tools must be a list"
        names: set[str] = set()
        for t in tools:
            fn = t.get("function") if isinstance(t, dict) else None
            if not isinstance(t, dict) or t.get("type") != "function" or not isinstance(fn, dict):
                return 'each tool must be {"type": "function", "function": {"name": ...}}'
            name = fn.get("name")
            if not isinstance(name, str) or not _TOOL_NAME.match(name):
                return "a tool name must be 1-64 letters, digits, '_' or '-'"
            if name in names:
                return f"the tool name {name!r} appears twice"
            names.add(name)
            params = fn.get("parameters", {"type": "object", "properties": {}})
            if not isinstance(params, dict):
                return f"the parameters of tool {name!r} must be a JSON schema object"
            spec: dict[str, Any] = {"name": name, "parameters": params}
            if isinstance(fn.get("description"), str):
                spec["description"] = fn["description"]
            if isinstance(fn.get("strict"), bool):
                spec["strict"] = fn["strict"]
            out.append({"type": "function", "function": spec})
    choice = body.get("tool_choice")
    if choice is None:
        return out, None
    if isinstance(choice, str):
        if choice not in ("none", "auto", "required"):
            return 'tool_choice must be "none", "auto", "required" or a named function'
        return out, choice
    fn = choice.get("function") if isinstance(choice, dict) else None
    if (
        not isinstance(choice, dict)
        or choice.get("type") != "function"
        or not isinstance(fn, dict)
        or not isinstance(fn.get("name"), str)
    ):
        return 'tool_choice must be "none", "auto", "required" or a named function'
    return out, {"type": "function", "function": {"name": fn["name"]}}


def _image_digest(item: MediaItem) -> str:
    return hashlib.sha256((item.ref or item.target).encode()).hexdigest()[:16]


def _parse_request(body: dict) -> tuple[str, list[MediaItem], dict[str, Any]] | str:
    """A chat completions request → (the text and images of its last user message, the
    ``InboundMessage.api`` data the core turns into the turn); or an error message.

    System and developer messages become ``instructions``; the other messages are kept
    in order, reduced to what the model needs (bot.api_turn)."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "messages must be a non-empty list"
    instructions: list[str] = []
    convo: list[dict[str, Any]] = []
    text: str = ""
    images: list[MediaItem] = []
    for i, m in enumerate(messages):
        role = m.get("role") if isinstance(m, dict) else None
        where = f"messages[{i}]"
        if role in ("system", "developer"):
            t = _plain_text(m.get("content"))
            if t is None:
                return f"{where}: the content of a {role} message must be text"
            if t.strip():
                instructions.append(t.strip())
        elif role == "user":
            parsed = _user_content(m.get("content"))
            if isinstance(parsed, str):
                return f"{where}: {parsed}"
            if parsed is None:
                return (
                    f"{where}: a user message's content must be a string or a list of "
                    '{"type": "text", "text": "..."} and {"type": "image_url", ...} parts'
                )
            text, images = parsed
            convo.append(
                {"role": "user", "content": text, "images": [_image_digest(x) for x in images]}
            )
        elif role == "assistant":
            t = _plain_text(m.get("content"))
            if t is None:
                return f"{where}: the content of an assistant message must be text"
            calls = m.get("tool_calls") or []
            if not isinstance(calls, list):
                return f"{where}: tool_calls must be a list"
            clean = []
            for c in calls:
                fn = c.get("function") if isinstance(c, dict) else None
                if (
                    not isinstance(c, dict)
                    or not isinstance(c.get("id"), str)
                    or not isinstance(fn, dict)
                    or not isinstance(fn.get("name"), str)
                ):
                    return f"{where}: each tool call needs an id and a function name"
                args = fn.get("arguments")
                if not isinstance(args, str):
                    args = json.dumps(args if args is not None else {})
                clean.append(
                    {
                        "id": c["id"],
                        "type": "function",
                        "function": {"name": fn["name"], "arguments": args},
                    }
                )
            entry: dict[str, Any] = {"role": "assistant", "content": t}
            if clean:
                entry["tool_calls"] = clean
            convo.append(entry)
        elif role == "tool":
            t = _plain_text(m.get("content"))
            cid = m.get("tool_call_id")
            if t is None or not isinstance(cid, str) or not cid:
                return f"{where}: a tool message needs a tool_call_id and text content"
            convo.append({"role": "tool", "tool_call_id": cid, "content": t})
        else:
            return (
                f"{where}: the role {role!r} is not supported "
                "(system, developer, user, assistant or tool)"
            )
    if not convo or convo[-1]["role"] not in ("user", "tool"):
        return "messages must end with a user message or with tool results"
    if convo[-1]["role"] == "user" and not text and not images:
        return "the last user message is empty"
    if convo[-1]["role"] == "tool":
        text, images = "", []
    tools = _parse_tools(body)
    if isinstance(tools, str):
        return tools
    params = _parse_params(body)
    if isinstance(params, str):
        return params
    if tools[1] is not None:
        params["tool_choice"] = tools[1]
    user = body.get("user")
    api: dict[str, Any] = {
        "instructions": "\n\n".join(instructions),
        "messages": convo,
        "tools": tools[0],
        "params": params,
        "stateless": not user,
    }
    return text, images, api


def _decode_data_url(url: str) -> bytes:
    head, sep, payload = url[5:].partition(",")
    if not sep:
        raise ValueError("not a data URL")
    if head.lower().endswith(";base64"):
        return base64.b64decode("".join(payload.split()), validate=True)
    return unquote_to_bytes(payload)
