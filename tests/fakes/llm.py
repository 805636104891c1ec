"""A scripted OpenAI-compatible chat-completions server for tests and benchmarks.

It listens on 127.0.0.1 (random port) and answers ``POST /v1/chat/completions`` (also
``/chat/completions``) from a queue of scripted responses, falling back to a default
responder when the queue is empty.  Every request body is recorded in ``.requests``.

    async with FakeLLM() as fake:                       # or: await fake.start() / await fake.stop()
        fake.script(
            tool_calls([("read", {"path": "a.txt"})]),  # first request -> a tool call
            text("done"),                               # second request -> plain text
        )
        client = LLMClient("openai/fake", api_base=fake.base_url)
        ...
        assert fake.requests[1]["messages"][-1]["role"] == "tool"

Response kinds (module-level helpers): ``text``, ``tool_calls``, ``raw_tool_calls``,
``error``, ``delay``, ``drop``; or any callable ``fn(request_json) -> response`` (sync or
async; may also return a plain ``str`` meaning ``text(str)``).  ``stream: true`` requests
get OpenAI-style SSE chunks.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import json
import time
from dataclasses import dataclass, field
from typing import Any
from collections.abc import Callable, Iterable

from aiohttp import web
import contextlib

__all__ = [
    "FakeLLM",
    "Reply",
    "always",
    "delay",
    "drop",
    "error",
    "fake_llm",
    "image_urls",
    "last_user_text",
    "raw_tool_calls",
    "streamed",
    "text",
    "tool_calls",
    "usage",
]


# --------------------------------------------------------------------------------------
# response descriptions


@dataclass
class Reply:
    """One scripted answer.  Build it with the helpers below rather than by hand."""

    kind: str  # "message" | "error" | "delay" | "drop"
    content: str | None = None
    calls: list[tuple[str, str, str | None]] = field(default_factory=list)  # (name, arguments, id)
    finish_reason: str | None = None
    usage: dict[str, int] | None = None
    status: int = 200
    body: Any = None
    retry_after: float | str | None = None
    seconds: float = 0.0
    then: Response | None = None
    # streaming (``stream: true``): the content chunks to send (default: 16 characters
    # each); ``gate`` (an asyncio.Event) holds the stream after its first content chunk
    # until it is set; ``cut_after`` drops the connection after that many content chunks
    chunks: list[str] | None = None
    gate: Any = None
    cut_after: int | None = None


Response = Reply | str | Callable[[dict], Any]


def text(
    content: str, *, usage: dict[str, int] | None = None, finish_reason: str = "stop"
) -> Reply:
    """A plain assistant message."""
    return Reply("message", content=content, usage=usage, finish_reason=finish_reason)


def streamed(
    *chunks: str,
    usage: dict[str, int] | None = None,
    gate: Any = None,
    cut_after: int | None = None,
) -> Reply:
    """A plain assistant message whose stream sends exactly these content chunks (a
    non-streaming request gets them joined).  ``gate``: an ``asyncio.Event`` the stream
    waits for after the first chunk; ``cut_after``: the connection drops after that many
    chunks (a provider failing mid-answer)."""
    return Reply(
        "message",
        content="".join(chunks),
        usage=usage,
        finish_reason="stop",
        chunks=list(chunks),
        gate=gate,
        cut_after=cut_after,
    )


def tool_calls(
    calls: Iterable[tuple[str, dict] | tuple[str, dict, str]],
    *,
    content: str | None = None,
    usage: dict[str, int] | None = None,
) -> Reply:
    """Native tool calls: ``[(name, arguments_dict), ...]`` (optionally ``(name, args, id)``).

    Ids are generated (``call_1``, ``call_2``, ...) unless given.
    """
    out = []
    for c in calls:
        name, args = c[0], c[1]
        cid = c[2] if len(c) > 2 else None
        out.append((name, json.dumps(args), cid))
    return Reply("message", content=content, calls=out, usage=usage, finish_reason="tool_calls")


def raw_tool_calls(
    calls: Iterable[tuple[str, str] | tuple[str, str, str]],
    *,
    content: str | None = None,
    usage: dict[str, int] | None = None,
) -> Reply:
    """Tool calls whose ``arguments`` strings are sent verbatim (e.g. malformed JSON)."""
    out = [(c[0], c[1], c[2] if len(c) > 2 else None) for c in calls]
    return Reply("message", content=content, calls=out, usage=usage, finish_reason="tool_calls")


def error(status: int, body: Any = None, retry_after: float | str | None = None) -> Reply:
    """An HTTP error.  ``body`` defaults to an OpenAI-style error object."""
    return Reply("error", status=status, body=body, retry_after=retry_after)


def delay(seconds: float, then: Response | None = None) -> Reply:
    """Wait ``seconds`` before answering with ``then`` (default: ``text("ok")``)."""
    return Reply("delay", seconds=seconds, then=then)


def drop() -> Reply:
    """Close the connection without answering (a connection error for the client)."""
    return Reply("drop")


def always(resp: Response) -> Callable[[dict], Response]:
    """A responder for ``fake.default``: every request gets ``resp`` (e.g. ``error(503)``
    for a provider that is down, ``drop()`` for one that refuses connections)."""
    return lambda request: resp


def usage(prompt: int, completion: int, cached: int = 0) -> dict[str, Any]:
    """An OpenAI ``usage`` object, with ``prompt_tokens_details.cached_tokens`` when cached."""
    u: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }
    if cached:
        u["prompt_tokens_details"] = {"cached_tokens": cached}
    return u


def last_user_text(request: dict) -> str:
    """The text of the last user message of a request (handy in callable responders)."""
    for m in reversed(request.get("messages") or []):
        if m.get("role") == "user":
            c = m.get("content")
            if isinstance(c, list):
                return "".join(p.get("text", "") for p in c if isinstance(p, dict))
            return c or ""
    return ""


def image_urls(request: dict) -> list[str]:
    """The ``image_url`` URLs of every message of a request, in order."""
    out = []
    for m in request.get("messages") or []:
        c = m.get("content")
        if isinstance(c, list):
            for p in c:
                if isinstance(p, dict) and p.get("type") == "image_url":
                    ref = p.get("image_url")
                    out.append(ref.get("url") if isinstance(ref, dict) else ref)
    return out


IMAGE_REJECTION = {
    "error": {
        "message": "Invalid content type. image_url is only supported by certain models.",
        "type": "invalid_request_error",
        "param": "messages.[1].content.[1].type",
        "code": None,
    }
}


def count_request_tokens(body: dict) -> int:
    """Tokens of a request as a provider would see them: messages, tool schemas and the
    requested answer size (litellm's tokenizer)."""
    import litellm

    n = litellm.token_counter(model="gpt-3.5-turbo", messages=body.get("messages") or [])
    if body.get("tools"):
        n += litellm.token_counter(model="gpt-3.5-turbo", text=json.dumps(body["tools"]))
    return n + int(body.get("max_tokens") or 0)


def context_overflow_body(window: int, n: int) -> dict:
    """OpenAI's answer to a request that does not fit the model's window."""
    return {
        "error": {
            "message": f"This model's maximum context length is {window} tokens. However, your messages "
            f"resulted in {n} tokens. Please reduce the length of the messages.",
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        }
    }


def _echo_ok(request: dict) -> Reply:
    return text("ok")


_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_error",
}


# --------------------------------------------------------------------------------------
# the server


class FakeLLM:
    """Scripted OpenAI-compatible server.  See the module docstring."""

    def __init__(
        self,
        *,
        model: str = "fake-model",
        host: str = "127.0.0.1",
        port: int = 0,
        keep_requests: bool = True,
        context_window: int | None = None,
    ) -> None:
        self.model = model
        self.host = host
        self.port = port
        self.requests: list[dict] = []
        self.headers: list[dict[str, str]] = []  # request headers, parallel to .requests
        self.keep_requests = keep_requests  # False: benchmarks, whose memory must stay flat
        self.handle_seconds: list[float] = []  # time spent answering each completion request
        self.default: Callable[[dict], Any] = _echo_ok
        self._queue: list[Response] = []
        self._runner: web.AppRunner | None = None
        self._closing: asyncio.Event | None = None  # set by stop(): delayed answers end now
        self._cond: asyncio.Condition | None = None
        self._ids = itertools.count(1)
        # like a real provider: a request over ``context_window`` tokens (messages and tool
        # schemas, counted with litellm's tokenizer) gets HTTP 400 context_length_exceeded
        self.context_window = context_window
        self.request_tokens: list[int] = []  # parallel to every request received (when counted)
        self.rejected: list[int] = []  # token sizes of the requests refused as too long
        # images (SPEC §11): image_url parts of every request, parallel to .requests
        self.image_parts: list[list[str]] = []
        self.reject_images = False  # True: a request with image parts gets OpenAI's HTTP 400
        self.image_rejections = 0
        # audio: /audio/transcriptions answers ``transcript``; /audio/speech ``speech_audio``
        self.transcript = "this is the transcript"
        self.transcriptions: list[
            dict
        ] = []  # {"model", "filename", "content_type", "size", "data"}
        self.speech_audio = b"OggS\x00\x02" + b"\x00" * 64  # what /audio/speech answers
        self.speech_requests: list[dict] = []  # JSON bodies of /audio/speech
        self.speech_error: int | None = None  # an HTTP status /audio/speech answers instead
        self.transcription_error: int | None = None  # the same for /audio/transcriptions
        # streaming: seconds between two content chunks (a model writing at some speed),
        # characters per chunk, and a hook ``fn(index, piece)`` (sync or async) called
        # before each content chunk goes out (tests synchronise with it)
        self.stream_interval = 0.0
        self.stream_chunk_chars = 16
        self.stream_hook: Callable[[int, str], Any] | None = None
        self.streams_started = 0
        self.streams_finished = 0  # streams sent to their end ([DONE])

    # lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        for prefix in ("/v1", ""):
            app.router.add_post(prefix + "/chat/completions", self._handle)
            app.router.add_get(prefix + "/models", self._models)
            app.router.add_post(prefix + "/audio/transcriptions", self._transcription)
            app.router.add_post(prefix + "/audio/speech", self._speech)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        server = site._server
        self.port = server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self._cond = asyncio.Condition()
        self._closing = asyncio.Event()

    async def stop(self) -> None:
        if self._closing is not None:
            # a reply still waiting out its delay ends now (the server's clean-up would
            # otherwise wait for it: seconds per test whose daemon stopped mid-call)
            self._closing.set()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> FakeLLM:
        await self.start()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.stop()

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    # scripting -------------------------------------------------------------------------

    def script(self, *responses: Response) -> FakeLLM:
        """Queue responses; each request consumes one, in order."""
        self._queue.extend(responses)
        return self

    @property
    def pending(self) -> int:
        """How many scripted responses are still queued."""
        return len(self._queue)

    def go_down(self, how: Response | None = None) -> None:
        """An outage from now on: every request not scripted fails with ``how`` (default
        HTTP 500; ``drop()`` for a connection that breaks) until :meth:`come_up`."""
        self._answering = self.default
        self.default = always(how if how is not None else error(500))

    def come_up(self, responder: Callable[[dict], Any] | None = None) -> None:
        """The outage ends: requests are answered by ``responder`` (default: as before it)."""
        self.default = responder or getattr(self, "_answering", _echo_ok)

    def reset(self) -> None:
        self._queue.clear()
        self.requests.clear()
        self.headers.clear()
        self.image_parts.clear()
        self.default = _echo_ok

    @property
    def last_request(self) -> dict:
        return self.requests[-1]

    async def wait_for_requests(self, n: int, timeout: float = 5.0) -> list[dict]:
        """Wait until at least ``n`` requests arrived; returns ``.requests``."""
        assert self._cond is not None, "start() the FakeLLM first"

        async def _wait() -> None:
            async with self._cond:  # type: ignore[union-attr]
                await self._cond.wait_for(lambda: len(self.requests) >= n)  # type: ignore[union-attr]

        try:
            await asyncio.wait_for(_wait(), timeout)
        except TimeoutError:
            raise AssertionError(
                f"expected {n} LLM requests within {timeout}s, got {len(self.requests)}"
            ) from None
        return self.requests

    # HTTP ------------------------------------------------------------------------------

    async def _models(self, request: web.Request) -> web.Response:
        return web.json_response(
            {"object": "list", "data": [{"id": self.model, "object": "model"}]}
        )

    async def _transcription(self, request: web.Request) -> web.Response:
        """OpenAI's ``/audio/transcriptions``: multipart ``file`` + ``model``."""
        form = await request.post()
        f = form.get("file")
        data = f.file.read() if hasattr(f, "file") else b""
        self.transcriptions.append(
            {
                "model": form.get("model"),
                "filename": getattr(f, "filename", None),
                "content_type": getattr(f, "content_type", None),
                "size": len(data),
                "data": data,
                "authorization": request.headers.get("Authorization", ""),
            }
        )
        if self.transcription_error is not None:
            return web.json_response(
                {"error": {"message": "transcription failed", "type": "server_error"}},
                status=self.transcription_error,
            )
        if form.get("response_format") == "text":
            return web.Response(text=self.transcript)
        return web.json_response({"text": self.transcript})

    async def _speech(self, request: web.Request) -> web.Response:
        """OpenAI's ``/audio/speech``: JSON in, audio bytes out."""
        body = await request.json()
        self.speech_requests.append(body)
        if self.speech_error is not None:
            return web.json_response(
                {"error": {"message": "speech failed", "type": "server_error"}},
                status=self.speech_error,
            )
        fmt = body.get("response_format") or "mp3"
        ctype = {"opus": "audio/ogg", "mp3": "audio/mpeg", "wav": "audio/wav"}.get(
            fmt, "audio/mpeg"
        )
        return web.Response(body=self.speech_audio, content_type=ctype)

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        started = time.perf_counter()
        try:
            return await self._answer(request)
        finally:
            self.handle_seconds.append(time.perf_counter() - started)
            if not self.keep_requests:
                self.requests.clear()
                self.headers.clear()

    async def _answer(self, request: web.Request) -> web.StreamResponse:
        try:
            body = await request.json()
        except Exception:
            return web.json_response(
                {"error": {"message": "invalid JSON body", "type": "invalid_request_error"}},
                status=400,
            )
        self.requests.append(body)
        self.headers.append(dict(request.headers))
        images = image_urls(body) if isinstance(body, dict) else []
        self.image_parts.append(images)
        if images and self.reject_images:
            self.image_rejections += 1
            if self._cond is not None:
                async with self._cond:
                    self._cond.notify_all()
            return web.json_response(IMAGE_REJECTION, status=400)
        if self._cond is not None:
            async with self._cond:
                self._cond.notify_all()
        if self.context_window is not None:
            n = count_request_tokens(body)
            self.request_tokens.append(n)
            if n > self.context_window:
                self.rejected.append(n)
                return web.json_response(context_overflow_body(self.context_window, n), status=400)
        resp: Response = self._queue.pop(0) if self._queue else self.default
        return await self._respond(request, body, resp)

    async def _resolve(self, body: dict, resp: Response | None) -> Reply:
        if resp is None:
            return text("ok")
        if isinstance(resp, str):
            return text(resp)
        if isinstance(resp, Reply):
            return resp
        if callable(resp):
            out = resp(body)
            if inspect.isawaitable(out):
                out = await out
            return await self._resolve(body, out)
        raise TypeError(f"unsupported fake response: {resp!r}")

    async def _closed_during(self, seconds: float) -> bool:
        """Wait ``seconds``; True when the fake began stopping meanwhile."""
        if self._closing is None:
            await asyncio.sleep(seconds)
            return False
        try:
            await asyncio.wait_for(self._closing.wait(), seconds)
        except TimeoutError:
            return False
        return True

    async def _respond(
        self, request: web.Request, body: dict, resp: Response | None
    ) -> web.StreamResponse:
        r = await self._resolve(body, resp)
        while r.kind == "delay":
            if await self._closed_during(r.seconds):
                return web.Response(status=503)  # the fake is stopping
            r = await self._resolve(body, r.then)
        if r.kind == "drop":
            if request.transport is not None:
                request.transport.close()
            return web.Response(status=500)  # never reaches the client
        if r.kind == "error":
            headers = {}
            if r.retry_after is not None:
                headers["Retry-After"] = str(r.retry_after)
            payload = r.body
            if payload is None:
                payload = {
                    "error": {
                        "message": f"fake error {r.status}",
                        "type": _ERROR_TYPES.get(r.status, "server_error"),
                        "code": str(r.status),
                    }
                }
            if isinstance(payload, (dict, list)):
                return web.json_response(payload, status=r.status, headers=headers)
            return web.Response(
                text=str(payload), status=r.status, headers=headers, content_type="application/json"
            )
        return await self._message(request, body, r)

    def _usage(self, body: dict, r: Reply) -> dict[str, int]:
        if r.usage is not None:
            u = dict(r.usage)
            u.setdefault("total_tokens", u.get("prompt_tokens", 0) + u.get("completion_tokens", 0))
            return u
        prompt_chars = len(json.dumps(body.get("messages", [])))
        completion_chars = len(r.content or "") + sum(len(a) + len(n) for n, a, _ in r.calls)
        p, c = max(1, prompt_chars // 4), max(1, completion_chars // 4)
        return {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}

    async def _message(self, request: web.Request, body: dict, r: Reply) -> web.StreamResponse:
        cid = f"chatcmpl-fake{next(self._ids)}"
        created = int(time.time())
        model = body.get("model") or self.model
        calls = [
            {
                "id": call_id or f"call_{next(self._ids)}",
                "type": "function",
                "function": {"name": n, "arguments": a},
            }
            for n, a, call_id in r.calls
        ]
        finish = r.finish_reason or ("tool_calls" if calls else "stop")
        usage = self._usage(body, r)

        if not body.get("stream"):
            message: dict[str, Any] = {"role": "assistant", "content": r.content}
            if calls:
                message["tool_calls"] = calls
            return web.json_response(
                {
                    "id": cid,
                    "object": "chat.completion",
                    "created": created,
                    "model": model,
                    "choices": [
                        {"index": 0, "message": message, "finish_reason": finish, "logprobs": None}
                    ],
                    "usage": usage,
                }
            )

        # streaming (SSE)
        resp = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        await resp.prepare(request)

        async def send(
            delta: dict | None, finish_reason: str | None = None, *, usage_only: bool = False
        ) -> None:
            chunk: dict[str, Any] = {
                "id": cid,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
            }
            if usage_only:
                chunk["choices"] = []
                chunk["usage"] = usage
            else:
                chunk["choices"] = [
                    {
                        "index": 0,
                        "delta": delta or {},
                        "finish_reason": finish_reason,
                        "logprobs": None,
                    }
                ]
            await resp.write(f"data: {json.dumps(chunk)}\n\n".encode())

        await send({"role": "assistant", "content": ""})
        self.streams_started += 1
        content = r.content or ""
        n = max(1, self.stream_chunk_chars)
        pieces = (
            r.chunks
            if r.chunks is not None
            else [content[i : i + n] for i in range(0, len(content), n)]
        )
        for i, piece in enumerate(pieces):
            if i and self.stream_interval:
                await asyncio.sleep(self.stream_interval)
            if self.stream_hook is not None:
                out = self.stream_hook(i, piece)
                if inspect.isawaitable(out):
                    await out
            await send({"content": piece})
            if i == 0 and r.gate is not None:
                await r.gate.wait()
            if r.cut_after is not None and i + 1 >= r.cut_after:
                if request.transport is not None:
                    request.transport.close()
                return resp
        for idx, call in enumerate(calls):
            fn = call["function"]
            await send(
                {
                    "tool_calls": [
                        {
                            "index": idx,
                            "id": call["id"],
                            "type": "function",
                            "function": {"name": fn["name"], "arguments": ""},
                        }
                    ]
                }
            )
            args = fn["arguments"]
            for i in range(0, len(args), 16):
                await send(
                    {"tool_calls": [{"index": idx, "function": {"arguments": args[i : i + 16]}}]}
                )
        await send({}, finish)
        if (body.get("stream_options") or {}).get("include_usage", True):
            await send(None, usage_only=True)
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        self.streams_finished += 1
        return resp


# --------------------------------------------------------------------------------------
# pytest fixture (import it into a test module: ``from tests.fakes.llm import fake_llm``)

try:
    import pytest as _pytest
except ImportError:  # pragma: no cover - bench scripts without pytest
    _pytest = None

if _pytest is not None:

    @_pytest.fixture
    async def fake_llm():
        """A started FakeLLM, stopped after the test."""
        fake = FakeLLM()
        await fake.start()
        try:
            yield fake
        finally:
            await fake.stop()


# --------------------------------------------------------------------------------------
# standalone: python -m tests.fakes.llm [--port 8999] [--reply TEXT] [--delay SECONDS]


def main(argv: list[str] | None = None) -> None:  # pragma: no cover - manual / bench use
    import argparse

    ap = argparse.ArgumentParser(description="Run the fake OpenAI-compatible LLM server.")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--reply", default="ok", help="text every request gets")
    ap.add_argument("--delay", type=float, default=0.0, help="seconds to wait before each answer")
    args = ap.parse_args(argv)

    async def run() -> None:
        fake = FakeLLM(port=args.port)
        fake.default = lambda req: (
            delay(args.delay, text(args.reply)) if args.delay else text(args.reply)
        )
        await fake.start()
        print(fake.base_url, flush=True)
        try:
            await asyncio.Event().wait()
        finally:
            await fake.stop()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(run())


if __name__ == "__main__":  # pragma: no cover
    main()
