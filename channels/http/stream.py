"""``stream: true``: a chat completion as server-sent events, written as the
model writes its text.

``LiveReply`` is one streamed answer.  The core feeds the adapter's live sink with visible
text (bot.delivery.previews.StreamText), a ``step`` when a model call follows tool calls (the next
text starts after a blank line) and each call's usage.  The SSE response opens with the first
text, so a turn that fails before any still answers with a JSON error (502, 429 for the
budget); a failure after text went out ends the stream with an ``error`` event.  When the
turn ends, what the final reply adds to the streamed text is sent (all of it, after a blank
line, in the rare case it does not continue the streamed text), then the calls of the
client's own tools as ``delta.tool_calls`` pieces (they end the turn, so they come last), the
finish chunk (``tool_calls`` after them) and, with ``stream_options.include_usage``, a usage
chunk with the provider's token counts."""

from __future__ import annotations

import json
import time
from typing import Any

from aiohttp import web

from channels.http.responses import INTERRUPTED, SHUTTING_DOWN, error, shutting_down, timed_out

DONE = b"data: [DONE]\n\n"
ARGS_PIECE = 32  # characters of a tool call's arguments per streamed chunk


class LiveReply:
    def __init__(self, request: web.Request, body: dict, *, rid: str, model_name: str) -> None:
        self.request = request
        self.rid = rid
        self.model_name = model_name
        opts = body.get("stream_options")
        self.include_usage = isinstance(opts, dict) and opts.get("include_usage") is True
        self.created = int(time.time())
        self.usage: dict[str, int] = {}
        self.resp: web.StreamResponse | None = None
        self.segment = ""  # text sent for the current model call
        self.gap = ""  # goes before the next text: a model call after tool calls

    def chunk(self, delta: dict | None, finish: str | None = None, **extra: Any) -> bytes:
        data: dict[str, Any] = {
            "id": f"chatcmpl-{self.rid}",
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model_name,
            "choices": []
            if delta is None
            else [{"index": 0, "delta": delta, "finish_reason": finish}],
            **extra,
        }
        return f"data: {json.dumps(data, ensure_ascii=False)}\n\n".encode()

    async def opened(self) -> web.StreamResponse:
        if self.resp is None:
            self.resp = web.StreamResponse(
                headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
            )
            await self.resp.prepare(self.request)
            await self.resp.write(self.chunk({"role": "assistant", "content": ""}))
        return self.resp

    async def event(self, kind: str, value: Any) -> None:
        """One event of the live sink (``done`` is the caller's)."""
        if kind == "usage":
            for k, v in (value or {}).items():
                if isinstance(v, int):
                    self.usage[k] = self.usage.get(k, 0) + v
        elif kind == "step":
            self.gap, self.segment = ("\n\n" if self.segment or self.gap else ""), ""
        elif kind == "text" and value:
            out = await self.opened()
            await out.write(self.chunk({"content": self.gap + value}))
            self.segment += value
            self.gap = ""

    async def timed_out(self) -> web.StreamResponse:
        if self.resp is None:
            return timed_out()
        err = {"message": "the assistant did not answer in time", "type": "server_error"}
        await self.resp.write(self.chunk(None, error={**err, "code": "timeout"}))
        await self.resp.write(DONE)
        return self.resp

    async def failed(self, kind: str, content: str) -> web.StreamResponse:
        """A failed turn: never a 200 whose content is an error message."""
        if kind == INTERRUPTED:  # the daemon stops: the answer so far is cut, not finished
            if self.resp is None:
                return shutting_down()
            code, content = "shutting_down", SHUTTING_DOWN
        elif self.resp is None:
            if kind == "budget":
                return error(429, content, "daily_cost_limit")
            return error(502, content or "the model provider failed", "model_error")
        else:
            code = "daily_cost_limit" if kind == "budget" else "model_error"
        err = {"message": content or "the model provider failed", "type": "server_error"}
        await self.resp.write(self.chunk(None, error={**err, "code": code}))
        await self.resp.write(DONE)
        await self.resp.write_eof()
        return self.resp

    async def finish(self, content: str, answer: dict[str, Any]) -> web.StreamResponse:
        """The end of the answer: the rest of its text, the client's tool calls (``answer``
        is the reply's API part: tool calls, finish reason), the finish chunk, the usage."""
        out = await self.opened()
        segment = self.segment
        rest = content[len(segment) :] if content.startswith(segment) else "\n\n" + content
        if rest.strip():
            await out.write(self.chunk({"content": (self.gap if not segment else "") + rest}))
        calls = answer.get("tool_calls") or []
        for index, call in enumerate(calls):
            for delta in tool_call_deltas(index, call):
                await out.write(self.chunk({"tool_calls": [delta]}))
        finish = answer.get("finish_reason") or "stop"
        await out.write(self.chunk({}, "tool_calls" if calls else finish))
        if self.include_usage:
            await out.write(self.chunk(None, usage=self._usage()))
        await out.write(DONE)
        await out.write_eof()
        return out

    def _usage(self) -> dict[str, Any]:
        usage = self.usage
        u: dict[str, Any] = {
            "prompt_tokens": usage.get("prompt_tokens", 0),
            "completion_tokens": usage.get("completion_tokens", 0),
            "total_tokens": usage.get("total_tokens", 0),
        }
        if usage.get("cached_tokens"):
            u["prompt_tokens_details"] = {"cached_tokens": usage["cached_tokens"]}
        return u


def tool_call_deltas(index: int, call: dict[str, Any]) -> list[dict[str, Any]]:
    """One tool call as OpenAI streams it: a first piece with its id, type, name and no
    arguments, then the arguments in pieces of ``ARGS_PIECE`` characters; a client joins
    the pieces of one ``index``."""
    fn = call.get("function") or {}
    args = str(fn.get("arguments") or "")
    head = {
        "index": index,
        "id": call.get("id", ""),
        "type": "function",
        "function": {"name": fn.get("name", ""), "arguments": ""},
    }
    rest = [
        {"index": index, "function": {"arguments": args[i : i + ARGS_PIECE]}}
        for i in range(0, len(args), ARGS_PIECE)
    ]
    return [head, *rest]
