"""The agent loop: ask the model, run the tools it asks for, repeat until it answers.

Native mode passes tool schemas via ``tools=`` and returns results as ``tool`` messages;
text mode (``native_tools=False``) parses ``<tool_call>`` blocks from the reply and returns
``<tool_result>`` blocks in one user message.  Calls of one reply run concurrently.
Images a tool returns (``ToolResult.images``, a browser screenshot) follow the results in a
user message when the model can see (``bot.media.policy.tool_images_message``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import dataclass, field
from collections.abc import Awaitable, Callable

from bot.media import MediaPolicy, has_image_parts, is_image_rejection, request_messages
from bot.media.policy import tool_images_message
from bot.model.gate import BudgetRefused
from bot.delivery.previews import StreamEvent
from bot.model import Completion, LLMClient, LLMError
from channels.redact import scrub
from bot.rules.textproto import (
    format_tool_results,
    parse_tool_calls,
    split_reasoning,
    strip_thinking,
)
from .tools import ToolContext, ToolRegistry, ToolResult

log = logging.getLogger(__name__)

MAX_TOOL_OUTPUT = 40000


@dataclass
class LoopResult:
    text: str
    new_messages: list[dict] = field(default_factory=list)
    error: str | None = None
    iterations: int = 0
    usage: dict[str, int] = field(default_factory=dict)
    tool_calls: int = 0
    # "model" (the provider failed), "config" (misconfigured model) or "budget" (the daily
    # cost limit); None when the turn did not fail
    error_kind: str | None = None
    cost: float = 0.0  # USD of the turn's model calls
    # calls of the HTTP API client's own tools that ended the turn (OpenAI's tool_calls
    # shape); the client runs them and continues the turn with their results
    client_calls: list[dict] = field(default_factory=list)
    finish_reason: str = "stop"  # "stop" | "tool_calls" | "length", as OpenAI names them


def truncate_output(text: str, limit: int = MAX_TOOL_OUTPUT) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[... {len(text) - limit} more characters truncated]"


def _prepare_output(text: str, ctx: ToolContext) -> str:
    # scrub first: a secret cut in half at the boundary would no longer match
    return truncate_output(scrub(text, ctx.secrets))


def _add_usage(total: dict[str, int], usage: dict[str, int]) -> None:
    for k, v in usage.items():
        if isinstance(v, int):
            total[k] = total.get(k, 0) + v


def is_context_overflow(e: LLMError) -> bool:
    """The provider refused the request because it does not fit the model's window."""
    from bot.model import litellm_path

    cause = e.cause
    lit = litellm_path.loaded()
    if (
        cause is not None
        and lit is not None
        and isinstance(cause, getattr(lit, "ContextWindowExceededError", ()))
    ):
        return True
    text = str(cause or "").lower()
    return any(
        s in text
        for s in (
            "context_length_exceeded",
            "maximum context length",
            "context window",
            "prompt is too long",
        )
    )


def _limit_text(n: int) -> str:
    return (
        f"I stopped after {n} tool steps without finishing. "
        "Tell me if I should continue, or narrow the request down."
    )


def _decode_args(raw: str) -> tuple[dict | None, str | None]:
    if raw is None or not raw.strip():
        return {}, None
    try:
        val = json.loads(raw)
    except json.JSONDecodeError as e:
        return (
            None,
            f"arguments are not valid JSON: {e.msg} (line {e.lineno}, column {e.colno}). Send one JSON object.",
        )
    if not isinstance(val, dict):
        return None, "arguments must be a JSON object"
    return val, None


def _over_budget(refused: BudgetRefused) -> LLMError:
    """The model gate's refusal as the turn's error: told, 429 on the API."""
    return LLMError(refused.message, status=429, kind="budget", reason="daily cost limit")


def _failed(
    e: LLMError,
    session: str,
    new: list[dict],
    iterations: int,
    usage: dict,
    calls: int,
    cost: float,
) -> LoopResult:
    """The result of a turn that ended with ``e`` (its text is told, never stored)."""
    log.warning(
        "turn failed session=%s after %d model calls: %s", session, iterations, e.user_message
    )
    return LoopResult(
        text=e.user_message,
        new_messages=new,
        error=e.user_message,
        iterations=iterations,
        usage=usage,
        tool_calls=calls,
        error_kind=e.kind,
        cost=cost,
    )


MAX_SUMMARY = 80  # characters of a tool call's one-line view in tool events


def summarize_args(args: dict | None, secrets: tuple[str, ...] = ()) -> str:
    """A short one-line view of a tool call's arguments for tool events: the registered
    secrets scrubbed (before cutting: half a secret would no longer match), ≤ 80 chars."""
    if not args:
        return ""
    line = " ".join(scrub(json.dumps(args, ensure_ascii=False), secrets).split())
    if len(line) > MAX_SUMMARY:
        line = line[: MAX_SUMMARY - 1] + "…"
    return line


@dataclass
class _Turn:
    """The state of one turn of the loop; the step functions below move it on."""

    llm: LLMClient
    registry: ToolRegistry
    ctx: ToolContext
    native_tools: bool
    reasoning_tags: bool
    fit: Callable[[list[dict], bool], Awaitable[list[dict]]] | None
    media: MediaPolicy | None
    budget: Callable[[], str | None] | None
    on_event: Callable[[StreamEvent], None] | None
    tools: list[dict] | None
    client_names: set[str]
    call_params: dict
    convo: list[dict]
    new: list[dict] = field(default_factory=list)
    usage: dict[str, int] = field(default_factory=dict)
    cost: float = 0.0
    n_calls: int = 0
    iterations: int = 0
    overflow_retries: int = 0
    streamed_calls: int = 0
    sent: list[dict] = field(default_factory=list)  # the messages of the last model request

    def tell(self, ev: StreamEvent) -> None:
        if self.on_event is None:
            return
        try:
            self.on_event(ev)
        except Exception:  # a preview must never fail the turn
            log.exception("stream consumer failed session=%s", self.ctx.session_key)

    def emit(self, msg: dict) -> None:
        self.convo.append(msg)
        self.new.append(msg)

    def final(self, text: str) -> LoopResult:
        return LoopResult(
            text=text,
            new_messages=self.new,
            error=None,
            iterations=self.iterations,
            usage=self.usage,
            tool_calls=self.n_calls,
            cost=self.cost,
        )

    def failed(self, e: LLMError) -> LoopResult:
        s = self
        return _failed(e, s.ctx.session_key, s.new, s.iterations, s.usage, s.n_calls, s.cost)


def _start(
    llm: LLMClient,
    messages: list[dict],
    registry: ToolRegistry,
    ctx: ToolContext,
    native_tools: bool,
    client_tools: list[dict] | None,
    params: dict | None,
    **rest,
) -> _Turn:
    tools = registry.openai_tools() if native_tools and len(registry) else None
    # the HTTP API client's own tools: offered beside Chela's, never run here;
    # a call of one ends the loop so the client can run it
    client_names = {t["function"]["name"] for t in client_tools or ()}
    if client_tools and native_tools:
        tools = [*(tools or []), *client_tools]
    call_params = dict(params or {})
    if not tools:
        call_params.pop("tool_choice", None)
    return _Turn(
        llm=llm,
        registry=registry,
        ctx=ctx,
        native_tools=native_tools,
        tools=tools,
        client_names=client_names,
        call_params=call_params,
        convo=list(messages),
        **rest,
    )


async def _run_call(t: _Turn, name: str, args: dict | None, error: str | None) -> ToolResult:
    """One tool call, told as tool_start/tool_end events; its output scrubbed and cut."""
    ctx = t.ctx
    t.tell(StreamEvent("tool_start", tool=name, summary=summarize_args(args, ctx.secrets)))
    started = time.monotonic()
    out, result = "", ToolResult("")
    try:
        if error is not None:
            out = f"Error: {error}"
        else:
            result = await t.registry.run(name, args or {}, ctx)
            out = result.text
            log.info(
                "tool %s session=%s %.2fs%s",
                name,
                ctx.session_key,
                time.monotonic() - started,
                " (error)" if out.startswith("Error:") else "",
            )
    finally:  # a cancelled call ends too (ok False)
        ok = bool(out) and not out.startswith("Error:")
        seen = _prepare_output(out, ctx)  # what the model is given: its size is told
        elapsed = time.monotonic() - started
        t.tell(StreamEvent("tool_end", tool=name, duration=elapsed, ok=ok, result_chars=len(seen)))
    return ToolResult(seen, result.images)


async def _show_images(t: _Turn, names: list[str], results: list[ToolResult]) -> None:
    """The images the calls returned, after their results, for a model that can see (one
    that cannot has the files named in the results' text); see ``tool_images_message``.
    Owner turns only: a guest's turn is shown no tool's image."""
    images = [(n, path) for n, r in zip(names, results, strict=True) for path in r.images]
    if not images or t.ctx.trust != "owner" or t.media is None or not t.media.can_see():
        return
    media = t.media
    msg = await asyncio.to_thread(
        tool_images_message, images, media.image_max_px, media.tool_image_dir
    )
    if msg is not None:
        t.emit(msg)


async def _call_model(t: _Turn) -> Completion:
    """One model request (fitted, budget-checked, streamed when someone listens)."""
    t.sent = t.convo
    if t.fit is not None:
        t.convo = await t.fit(t.convo, False)
    t.sent = send = request_messages(t.convo, t.media)
    refusal = t.budget() if t.budget is not None else None
    if refusal:
        raise BudgetRefused(refusal, "turn")
    params = t.call_params or None
    if t.on_event is None:
        comp = await t.llm.complete(send, t.tools, params=params)
    else:
        if t.streamed_calls:
            t.tell(StreamEvent("step"))
        t.streamed_calls += 1
        on_delta = lambda text: t.tell(StreamEvent("text", text))  # noqa: E731
        comp = await t.llm.complete(send, t.tools, on_delta=on_delta, params=params)
    # the client's tool_choice is for the first answer: after a tool ran, the model must
    # be free to answer in text
    t.call_params.pop("tool_choice", None)
    return comp


async def _after_model_error(t: _Turn, e: LLMError) -> LoopResult | None:
    """A failed model call: None = try the same step again (without images, or after
    compacting an overflowing context), else the failed turn's result."""
    media = t.media
    if media is not None and has_image_parts(t.sent) and is_image_rejection(e):
        media.mark_blind()  # the same turn again, without images
        return None
    if t.fit is not None and t.overflow_retries < 2 and is_context_overflow(e):
        t.overflow_retries += 1
        log.info("context overflow session=%s; compacting and retrying", t.ctx.session_key)
        try:
            t.convo = await t.fit(t.convo, True)
        except BudgetRefused as refused:  # compacting is a call the budget refuses
            return t.failed(_over_budget(refused))
        return None
    return t.failed(e)


async def _ask(t: _Turn) -> Completion | LoopResult | None:
    """The step's model call: its completion, a failed result, or None (step again)."""
    try:
        comp = await _call_model(t)
    except BudgetRefused as refused:  # the turn's call, or compacting before it
        return t.failed(_over_budget(refused))
    except LLMError as e:
        return await _after_model_error(t, e)
    _add_usage(t.usage, comp.usage)
    t.cost += comp.cost
    if comp.usage:
        t.tell(StreamEvent("usage", usage=dict(comp.usage)))
    return comp


def _wire_calls(calls) -> list[dict]:
    return [
        {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
        for c in calls
    ]


async def _native_tools_step(t: _Turn, comp: Completion) -> LoopResult | None:
    """Run the native tool calls of an answer; a result when the client's tools end it."""
    calls = comp.tool_calls
    t.emit({"role": "assistant", "content": comp.text or None, "tool_calls": _wire_calls(calls)})
    own = [c for c in calls if c.name not in t.client_names]
    jobs = [_run_call(t, c.name, *_decode_args(c.arguments)) for c in own]
    t.n_calls += len(own)
    results = await asyncio.gather(*jobs)
    for c, out in zip(own, results, strict=True):
        t.emit({"role": "tool", "tool_call_id": c.id, "content": out.text})
    await _show_images(t, [c.name for c in own], results)
    if len(own) == len(calls):
        return None
    # the client runs the rest and continues the turn
    result = t.final(comp.text or "")
    result.client_calls = _wire_calls(c for c in calls if c.name in t.client_names)
    result.finish_reason = "tool_calls"
    return result


async def _text_tools_step(t: _Turn, comp: Completion) -> bool:
    """Run the <tool_call> blocks of a text-mode answer; False when there are none."""
    # a <tool_call> the model only thought about (inside <think>) is not executed
    _visible, parsed = parse_tool_calls(
        strip_thinking(comp.text) if t.reasoning_tags else comp.text
    )
    if not parsed:
        return False
    t.emit({"role": "assistant", "content": comp.text})
    t.n_calls += len(parsed)
    results = await asyncio.gather(*(_run_call(t, p.name, p.arguments, p.error) for p in parsed))
    names = [p.name or "unknown" for p in parsed]
    texts = [r.text for r in results]
    t.emit({"role": "user", "content": format_tool_results(list(zip(names, texts, strict=True)))})
    await _show_images(t, names, results)
    return True


def _answer(t: _Turn, comp: Completion) -> LoopResult:
    text = comp.text or ""
    if t.reasoning_tags:
        text, _thinking = split_reasoning(text)
    t.emit({"role": "assistant", "content": text})
    result = t.final(text)
    if comp.raw_finish_reason == "length":
        result.finish_reason = "length"
    return result


async def _step(t: _Turn) -> LoopResult | None:
    """One model call and what follows it: a result ends the turn, None goes on."""
    t.iterations += 1
    comp = await _ask(t)
    if comp is None:  # the same step again
        t.iterations -= 1
        return None
    if isinstance(comp, LoopResult):
        return comp
    if t.native_tools and comp.tool_calls:
        return await _native_tools_step(t, comp)
    if not t.native_tools and await _text_tools_step(t, comp):
        return None
    return _answer(t, comp)


async def run_agent_loop(
    llm: LLMClient,
    messages: list[dict],
    registry: ToolRegistry,
    ctx: ToolContext,
    *,
    native_tools: bool = True,
    max_iterations: int = 20,
    reasoning_tags: bool = False,
    fit: Callable[[list[dict], bool], Awaitable[list[dict]]] | None = None,
    media: MediaPolicy | None = None,
    budget: Callable[[], str | None] | None = None,
    on_event: Callable[[StreamEvent], None] | None = None,
    client_tools: list[dict] | None = None,
    params: dict | None = None,
) -> LoopResult:
    """Drive one turn.  Never raises for model or tool failures (cancellation propagates).

    ``fit(messages, overflow)`` (compaction) returns the messages to send: it is
    called before every model request, and after the provider reports a context overflow
    (then the request is retried; at most twice per turn).  ``media`` decides how stored
    image references become image parts (bot.media); when a provider rejects images, the
    request goes again without them.

    ``budget()`` runs before every model call and returns a refusal (the daily cost limit
    was reached) or None.  A failed turn's error text is returned as
    ``text`` and ``error``, never as a message of ``new_messages``.

    ``on_event`` streams the turn (bot.delivery.previews): every model call is streamed
    and its content reported as ``text`` events as it arrives; a ``step`` event says a new
    model call begins (the text before was an intermediate step), a ``usage`` event gives
    each call's token counts, ``tool_start``/``tool_end`` events frame each tool call (its
    arguments summarized with secrets scrubbed; its duration, ok False when it failed).
    The callback must not block; its errors are logged.

    ``client_tools`` (an HTTP API client's own tools) are offered beside the
    registry's; when the model calls one, Chela's own calls of that answer run and the
    loop ends with ``client_calls`` set.  ``params`` go to every model call (their
    ``tool_choice`` to the first only)."""
    t = _start(
        llm,
        messages,
        registry,
        ctx,
        native_tools,
        client_tools,
        params,
        reasoning_tags=reasoning_tags,
        fit=fit,
        media=media,
        budget=budget,
        on_event=on_event,
    )
    max_iterations = max(1, int(max_iterations))
    while t.iterations < max_iterations:
        result = await _step(t)
        if result is not None:
            return result
    log.info("turn hit the tool step limit session=%s (%d)", ctx.session_key, max_iterations)
    text = _limit_text(max_iterations)
    t.emit({"role": "assistant", "content": text})
    return t.final(text)


__all__ = ["MAX_TOOL_OUTPUT", "LoopResult", "run_agent_loop", "summarize_args", "truncate_output"]
