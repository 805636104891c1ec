"""``HttpChannel``: the OpenAI-compatible HTTP API's routes and its waiting requests.

Each request becomes one inbound message; the reply is collected from ``send`` calls
until the core signals ``turn_done``.  The adapter only validates (``parse.py``) and
translates: the client's system messages, conversation, tools and model parameters travel
to the core in ``InboundMessage.api`` (bot.conversation.api decides what they do); the reply's
usage, client tool calls and finish reason come back in ``OutboundMessage.api``.  ``user``
names a server-side conversation; without it a request is stateless.  ``guard.py`` runs
before every route; ``stream.py`` writes ``stream: true`` answers.
"""

from __future__ import annotations

import asyncio
import binascii
import dataclasses
import errno
import json
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any

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
from channels.http.guard import Guard, add_cors_headers, norm_origin
from channels.http.parse import decode_data_url, parse_request
from channels.http.responses import (
    INTERRUPTED,
    MAX_BODY,
    AddressInUse,
    error,
    failure,
    shutting_down,
    timed_out,
)
from channels.http.stream import LiveReply
from channels.util import capped_file, is_loopback

log = logging.getLogger("chela.http")


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
        mounts: Callable[[], Iterable[tuple[str, web.Application]]] | None = None,
        more_models: Iterable[str] = (),
    ):
        self.host, self.port, self.token = host, port, token
        # sub-applications served beside the API (e.g. the Control UI under /ui), built
        # fresh by the caller for each start; this channel knows nothing of their content
        self.mounts = mounts
        self.model_name = model_name
        # every model /v1/models lists: the default agent's, then the other agents'
        self.models = [model_name, *(m for m in more_models if m != model_name)]
        self.reply_timeout = reply_timeout
        self.allowed_origins = {norm_origin(o) for o in allowed_origins if o}
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
        mounted = list(self.mounts()) if self.mounts is not None else []
        guard = Guard(
            host=self.host,
            token=self.token,
            allowed_origins=self.allowed_origins,
            token_hint=self.token_hint,
            base_url=self._base_url,
            mounted=[prefix for prefix, _ in mounted],
        )
        app = web.Application(client_max_size=MAX_BODY, middlewares=[guard.middleware])
        for prefix, sub in mounted:
            app.add_subapp(prefix, sub)
        if mounted:
            app.router.add_get("/", _redirect_to(mounted[0][0] + "/"))
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/v1/models", self._models)
        app.router.add_get("/v1/models/{model_id:.+}", self._model)
        app.router.add_post("/v1/chat/completions", self._completions)
        app.on_response_prepare.append(add_cors_headers)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        try:
            await site.start()
        except OSError as e:
            await self._runner.cleanup()
            self._runner = None
            if e.errno == errno.EADDRINUSE:  # never retried: another process holds it
                raise AddressInUse(self.host, self.port) from e
            raise ChannelError(f"cannot listen on {self.host}:{self.port}: {e.strerror}") from e
        self.bound_port = self._runner.addresses[0][1]  # (host, port, ...) of the bound socket
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
            data = decode_data_url(item.ref)
        except (ValueError, binascii.Error) as e:
            raise ChannelError(f"http: {item.name} is not a valid data URL ({e})") from None
        dest = Path(dest_dir).absolute() / f"http_{uuid.uuid4().hex[:12]}_{item.name}"
        with capped_file(dest, max_bytes, f"http: {item.name}") as out:
            out.write(data)
        return dataclasses.replace(item, target=str(dest), ref="")

    async def turn_done(self, chat_id: str, message_id: str) -> None:
        entry = self._pending.get(chat_id)
        if not entry or entry[0].done():
            return
        if self._interrupted(chat_id, entry[1]):
            self._failed[chat_id] = INTERRUPTED
        entry[0].set_result("\n\n".join(p for p in entry[1] if p))

    def _interrupted(self, chat_id: str, parts: list[str]) -> bool:
        """The turn ends without a reply because it was cancelled (the daemon stops after
        its drain): the caller gets a 503, never an empty 200 it cannot tell from an answer.
        A finished turn always sends its reply (with its API part) before ``turn_done``."""
        if parts or chat_id in self._answers or chat_id in self._failed:
            return False
        task = asyncio.current_task()
        return self._closing or (task is not None and task.cancelling() > 0)

    def live_stream(self, chat_id: str) -> Callable[[str, Any], None] | None:
        return self._live.get(chat_id)

    def _base_url(self) -> str:
        host = (
            self.host
            if is_loopback(self.host) or self.host not in ("0.0.0.0", "::", "")
            else "127.0.0.1"
        )
        if ":" in host:
            host = f"[{host}]"
        return f"http://{host}:{self.bound_port or self.port}"

    # -------------------------------------------------------------------------- routes
    async def _healthz(self, request: web.Request) -> web.Response:
        return web.json_response({"ok": True})

    def _model_card(self, model: str = "") -> dict[str, Any]:
        return {
            "id": model or self.model_name,
            "object": "model",
            "created": self._created,
            "owned_by": "chela",
        }

    async def _models(self, request: web.Request) -> web.Response:
        cards = [self._model_card(m) for m in self.models]
        return web.json_response({"object": "list", "data": cards})

    async def _model(self, request: web.Request) -> web.Response:
        """``GET /v1/models/{id}``: one of the models there are (an agent each); 404 for any
        other id (chat completions serve any other model name: clients hard-code names)."""
        model_id = request.match_info["model_id"]
        if model_id not in self.models:
            served = ", ".join(repr(m) for m in self.models)
            return error(
                404,
                f"the model {model_id!r} does not exist; this server serves {served}",
                "model_not_found",
            )
        return web.json_response(self._model_card(model_id))

    async def _completions(self, request: web.Request) -> web.StreamResponse:
        if self._closing:
            return shutting_down()
        body = await _read_body(request)
        if isinstance(body, web.Response):
            return body
        msg = _inbound(body)
        if isinstance(msg, web.Response):
            return msg
        fut: asyncio.Future = asyncio.get_running_loop().create_future()
        self._pending[msg.chat_id] = (fut, [])
        if body.get("stream"):
            try:  # _stream may read self._answers[chat_id] (usage, tool calls, finish)
                return await self._stream(request, body, msg, fut)
            finally:
                self._answers.pop(msg.chat_id, None)
        try:
            assert self._sink is not None
            await self._sink(msg)
            content = await asyncio.wait_for(fut, self.reply_timeout)
        except TimeoutError:
            return timed_out()
        except asyncio.CancelledError:
            if self._closing and fut.cancelled():
                return shutting_down()
            raise
        finally:
            self._pending.pop(msg.chat_id, None)
            failed = self._failed.pop(msg.chat_id, "")
            answer = self._answers.pop(msg.chat_id, {})
        if failed:  # never a 200 whose content is an error message
            return failure(failed, content)
        return web.json_response(self._completion(body, msg.message_id, content, answer))

    def _completion(
        self, body: dict, rid: str, content: str, answer: dict[str, Any]
    ) -> dict[str, Any]:
        calls = answer.get("tool_calls") or []
        message: dict[str, Any] = {"role": "assistant", "content": content or None}
        if calls:  # the client's own tools: it runs them and sends the results back
            message["tool_calls"] = calls
        else:
            message["content"] = content
        model = body.get("model")
        return {
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

    async def _stream(
        self, request: web.Request, body: dict, msg: InboundMessage, fut: asyncio.Future
    ) -> web.StreamResponse:
        """``stream: true``: the live sink's events go to a ``LiveReply`` until the turn
        is done (``stream.py`` says what is written when)."""
        chat_id = msg.chat_id
        reply = LiveReply(request, body, rid=msg.message_id, model_name=self.model_name)
        events: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        self._live[chat_id] = lambda kind, value: events.put_nowait((kind, value))
        fut.add_done_callback(lambda _f: events.put_nowait(("done", None)))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.reply_timeout
        try:
            assert self._sink is not None
            await self._sink(msg)
            while True:
                kind, value = await asyncio.wait_for(events.get(), max(0.0, deadline - loop.time()))
                if kind == "done":
                    break
                await reply.event(kind, value)
        except TimeoutError:
            return await reply.timed_out()
        except (ConnectionError, asyncio.CancelledError):
            raise  # the client went away (or the server stops); the turn finishes unseen
        finally:
            self._live.pop(chat_id, None)
            self._pending.pop(chat_id, None)
            failed = self._failed.pop(chat_id, "")
        content = fut.result() if fut.done() and not fut.cancelled() else ""
        if fut.cancelled() and self._closing:  # stop() with the turn still running
            failed = INTERRUPTED
        if failed:
            return await reply.failed(failed, content)
        return await reply.finish(content, self._answers.get(chat_id, {}))


def _redirect_to(location: str) -> Callable[[web.Request], Awaitable[web.Response]]:
    """``GET /`` when a sub-application is mounted: a browser lands on it."""

    async def redirect(request: web.Request) -> web.Response:
        return web.Response(status=302, headers={"Location": location})

    return redirect


async def _read_body(request: web.Request) -> dict | web.Response:
    """The request's JSON object, or the 400 it earns."""
    raw = await request.read()  # over client_max_size raises 413, turned into JSON by the guard
    try:
        body = json.loads(raw)
    except RecursionError:
        return error(400, "the body is nested too deeply", "invalid_request_error")
    except (json.JSONDecodeError, UnicodeDecodeError, ValueError):
        return error(400, "the body is not valid JSON", "invalid_request_error")
    if not isinstance(body, dict):
        return error(
            400, "the body must be a JSON object with a messages list", "invalid_request_error"
        )
    return body


def _inbound(body: dict) -> InboundMessage | web.Response:
    """The inbound message a request body makes, or the 400 it earns."""
    parsed = parse_request(body)
    if isinstance(parsed, str):
        return error(400, parsed, "invalid_request_error")
    text, images, api = parsed
    user = body.get("user")
    if user is not None and not isinstance(user, str):
        return error(400, "user must be a string", "invalid_request_error")
    user = (user or "")[:128]
    rid = uuid.uuid4().hex
    return InboundMessage(
        channel="http",
        chat_id=f"req-{rid}",
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
