"""The agent loop: ask the model, run the tools it asks for, repeat until it answers.

Native mode passes tool schemas via ``tools=`` and returns results as ``tool`` messages;
text mode (``native_tools=False``) parses ``<tool_call>`` blocks from the reply and returns
``<tool_result>`` blocks in one user message.  Calls of one reply run concurrently.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import dataclass, field
from collections.abc import Awaitable, Callable

from bot.media import MediaPolicy, has_image_parts, is_image_rejection, request_messages
from bot.model.gate import BudgetRefused
from bot.delivery.previews import StreamEvent
from bot.model import Completion, LLMClient, LLMError
from channels.redact import scrub
from .textproto import format_tool_results, parse_tool_calls, split_reasoning, strip_thinking
from .tools import ToolContext, ToolRegistry

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
    # shape); the client runs them and continues the turn with their results (SPEC §13)
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
    from bot.model import lite as llm_mod

    cause = e.cause
    lit = llm_mod._litellm
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


async def _run_call(
    registry: ToolRegistry, ctx: ToolContext, name: str, args: dict | None, error: str | None
) -> str:
    if error is not None:
        out = f"Error: {error}"
    else:
        started = time.monotonic()
        out = await registry.execute(name, args or {}, ctx)
        log.info(
            "tool %s session=%s %.2fs%s",
            name,
            ctx.session_key,
            time.monotonic() - started,
            " (error)" if out.startswith("Error:") else "",
        )
    return _prepare_output(out, ctx)


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
    """The model gate's refusal (SPEC §9.5) as the turn's error: told, 429 on the API."""
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

    ``fit(messages, overflow)`` (compaction, SPEC §10) returns the messages to send: it is
    called before every model request, and after the provider reports a context overflow
    (then the request is retried; at most twice per turn).  ``media`` decides how stored
    image references become image parts (bot.media); when a provider rejects images, the
    request goes again without them.

    ``budget()`` runs before every model call and returns a refusal (the daily cost limit
    was reached, SPEC §12) or None.  A failed turn's error text is returned as
    ``text`` and ``error``, never as a message of ``new_messages``.

    ``on_event`` streams the turn (SPEC §12, bot.delivery.previews): every model call is streamed
    and its content reported as ``text`` events as it arrives; a ``step`` event says a new
    model call begins (the text before was an intermediate step), a ``usage`` event gives
    each call's token counts.  The callback must not block; its errors are logged.

    ``client_tools`` (an HTTP API client's own tools, SPEC §13) are offered beside the
    registry's; when the model calls one, Chela's own calls of that answer run and the
    loop ends with ``client_calls`` set.  ``params`` go to every model call (their
    ``tool_choice`` to the first only)."""
    convo: list[dict] = list(messages)
    new: list[dict] = []
    usage: dict[str, int] = {}
    cost = 0.0
    n_calls = 0
    iterations = 0
    max_iterations = max(1, int(max_iterations))
    tools = registry.openai_tools() if native_tools and len(registry) else None
    # the HTTP API client's own tools (SPEC §13): offered beside Chela's, never run here;
    # a call of one ends the loop so the client can run it
    client_names = {t["function"]["name"] for t in client_tools or ()}
    if client_tools and native_tools:
        tools = [*(tools or []), *client_tools]
    call_params = dict(params or {})
    if not tools:
        call_params.pop("tool_choice", None)
    overflow_retries = 0
    streamed_calls = 0

    def tell(ev: StreamEvent) -> None:
        if on_event is None:
            return
        try:
            on_event(ev)
        except Exception:  # a preview must never fail the turn
            log.exception("stream consumer failed session=%s", ctx.session_key)

    def on_delta(text: str) -> None:
        tell(StreamEvent("text", text))

    def emit(msg: dict) -> None:
        convo.append(msg)
        new.append(msg)

    def final(text: str) -> LoopResult:
        return LoopResult(
            text=text,
            new_messages=new,
            error=None,
            iterations=iterations,
            usage=usage,
            tool_calls=n_calls,
            cost=cost,
        )

    while iterations < max_iterations:
        iterations += 1
        send = convo
        try:
            if fit is not None:
                convo = await fit(convo, False)
            send = request_messages(convo, media)
            refusal = budget() if budget is not None else None
            if refusal:
                raise BudgetRefused(refusal, "turn")
            comp: Completion
            if on_event is None:
                comp = await llm.complete(send, tools, params=call_params or None)
            else:
                if streamed_calls:
                    tell(StreamEvent("step"))
                streamed_calls += 1
                comp = await llm.complete(
                    send, tools, on_delta=on_delta, params=call_params or None
                )
            # the client's tool_choice is for the first answer: after a tool ran, the
            # model must be free to answer in text
            call_params.pop("tool_choice", None)
        except BudgetRefused as refused:  # the turn's call, or compacting before it
            return _failed(
                _over_budget(refused), ctx.session_key, new, iterations, usage, n_calls, cost
            )
        except LLMError as e:
            if media is not None and has_image_parts(send) and is_image_rejection(e):
                media.mark_blind()  # SPEC §11: the same turn again, without images
                iterations -= 1
                continue
            if fit is not None and overflow_retries < 2 and is_context_overflow(e):
                overflow_retries += 1
                log.info("context overflow session=%s; compacting and retrying", ctx.session_key)
                try:
                    convo = await fit(convo, True)
                except BudgetRefused as refused:  # compacting is a call the budget refuses
                    e = _over_budget(refused)
                else:
                    iterations -= 1
                    continue
            return _failed(e, ctx.session_key, new, iterations, usage, n_calls, cost)
        _add_usage(usage, comp.usage)
        cost += comp.cost
        if comp.usage:
            tell(StreamEvent("usage", usage=dict(comp.usage)))

        if native_tools and comp.tool_calls:
            calls = comp.tool_calls
            emit(
                {
                    "role": "assistant",
                    "content": comp.text or None,
                    "tool_calls": [
                        {
                            "id": c.id,
                            "type": "function",
                            "function": {"name": c.name, "arguments": c.arguments},
                        }
                        for c in calls
                    ],
                }
            )
            own = [c for c in calls if c.name not in client_names]
            jobs = []
            for c in own:
                args, err = _decode_args(c.arguments)
                jobs.append(_run_call(registry, ctx, c.name, args, err))
            n_calls += len(own)
            results = await asyncio.gather(*jobs)
            for c, out in zip(own, results, strict=True):
                emit({"role": "tool", "tool_call_id": c.id, "content": out})
            if len(own) < len(calls):  # the client runs the rest and continues the turn
                result = final(comp.text or "")
                result.client_calls = [
                    {
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.name, "arguments": c.arguments},
                    }
                    for c in calls
                    if c.name in client_names
                ]
                result.finish_reason = "tool_calls"
                return result
            continue

        if not native_tools:
            # a <tool_call> the model only thought about (inside <think>) is not executed
            _visible, parsed = parse_tool_calls(
                strip_thinking(comp.text) if reasoning_tags else comp.text
            )
            if parsed:
                emit({"role": "assistant", "content": comp.text})
                n_calls += len(parsed)
                results = await asyncio.gather(
                    *(_run_call(registry, ctx, p.name, p.arguments, p.error) for p in parsed)
                )
                names = [p.name or "unknown" for p in parsed]
                emit(
                    {
                        "role": "user",
                        "content": format_tool_results(list(zip(names, results, strict=True))),
                    }
                )
                continue

        text = comp.text or ""
        if reasoning_tags:
            text, _thinking = split_reasoning(text)
        emit({"role": "assistant", "content": text})
        result = final(text)
        if comp.raw_finish_reason == "length":
            result.finish_reason = "length"
        return result

    log.info("turn hit the tool step limit session=%s (%d)", ctx.session_key, max_iterations)
    text = _limit_text(max_iterations)
    emit({"role": "assistant", "content": text})
    return final(text)


__all__ = ["MAX_TOOL_OUTPUT", "LoopResult", "run_agent_loop", "truncate_output"]
