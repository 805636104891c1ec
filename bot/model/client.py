"""The model client: one ``complete()`` call, with our own retries, a fallback chain,
cooldowns, honest errors, and usage and cost per call.

Each model of the chain is reached through the path that serves it (``bot.model.paths``:
Chela's own OpenAI-compatible client, or litellm, imported only when a model needs it).
Errors reach callers only as
:class:`LLMError` (``bot.model.errors``), whose ``user_message`` is one short true
sentence, safe to show to the user; the provider's own message goes to the log (secrets
redacted).

One retry loop owns retries (litellm's are off: ``num_retries=0``, ``max_retries=0``).  It
retries one model call, never a turn, so a tool that already ran is never run again.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from bot.model import choice
from bot.model.errors import LLMError, _classify, _retry_after, no_key_error, unroutable_error
from bot.model.paths import path_for
from bot.model.response import Completion, _parse_response
from bot.model.routing import ModelPath, ModelTarget, Route, cost_of
from bot.model.stream import collect
from channels.redact import scrub
from channels.retry import Backoff

log = logging.getLogger(__name__)

# called with every Completion a model call returned (usage and cost); the agent
# sets it for the duration of a turn, so every call of the turn is recorded (the loop's,
# a compaction summary's, a memory flush's) with the turn's session
ON_CALL: contextvars.ContextVar[Callable[[Completion], None] | None] = contextvars.ContextVar(
    "chela_llm_on_call", default=None
)


@dataclass
class _State:
    cooled_until: float = 0.0
    last_reason: str = ""


class LLMClient:
    """Talks to a chain of models, each through its path.  Safe to share across concurrent turns.

    ``fallbacks`` are tried in order when the current model fails after its retries with
    an error another model may not have (429, 5xx, timeout, connection, 401/403/404, a
    model string that cannot be routed).  A model that failed is skipped for ``cooldown``
    seconds, then tried again.  ``clock`` and ``sleep`` are injectable for tests."""

    def __init__(
        self,
        model: str,
        api_base: str = "",
        api_key: str = "",
        timeout: float = 120,
        max_retries: int = 3,
        backoff_base: float = 0.5,
        extra: dict | None = None,
        *,
        max_backoff: float = 30.0,
        max_retry_after: float = 30.0,
        fallbacks: Sequence[ModelTarget] = (),
        cooldown: float = 300.0,
        key: str = "agent.model",
        secrets: Sequence[str] = (),
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
    ) -> None:
        self.targets: list[ModelTarget] = [
            ModelTarget(model, api_base, api_key, key),
            *fallbacks,
        ]
        self._state = [_State() for _ in self.targets]
        self.fallback_count = len(fallbacks)  # targets past these: sessions' /model choices
        self.timeout = timeout
        self.max_retries = max(0, int(max_retries))
        self.backoff = Backoff(backoff_base, max_backoff, jitter=0.2)
        self.max_retry_after = max_retry_after
        self.cooldown = max(0.0, float(cooldown))
        self.extra = dict(extra or {})
        self._secrets = tuple(s for s in (*secrets, *(t.api_key for t in self.targets)) if s)
        self.clock = clock
        self.sleep = sleep

    # the primary model (what the rest of Chela calls "the model")
    @property
    def model(self) -> str:
        return self.targets[0].model

    @property
    def api_base(self) -> str:
        return self.targets[0].api_base

    @property
    def _api_key(self) -> str:
        return self.targets[0].api_key

    def add_target(self, target: ModelTarget) -> int:
        """A model a session switched to (``bot.model.choice``), kept with its state."""
        self.targets.append(target)
        self._state.append(_State())
        return len(self.targets) - 1

    def __repr__(self) -> str:  # never show the key
        return f"LLMClient(model={self.model!r}, api_base={self.api_base!r}, fallbacks={self.fallback_count})"

    # ------------------------------------------------------------------- the request
    def _kwargs(
        self, target: ModelTarget, messages: list[dict], tools: list[dict] | None
    ) -> dict[str, Any]:
        kw: dict[str, Any] = dict(self.extra)
        kw.update(
            model=target.model,
            messages=messages,
            timeout=self.timeout,
            num_retries=0,
            max_retries=0,
        )
        if target.api_base:
            kw["api_base"] = target.api_base
        key = target.api_key or ("sk-local" if target.api_base else "")
        if key:
            kw["api_key"] = key
        if tools:
            kw["tools"] = tools
        return kw

    def _request(
        self,
        path: ModelPath,
        i: int,
        messages: list[dict],
        tools: list[dict] | None,
        params: dict[str, Any] | None,
        streaming: bool,
    ) -> tuple[Route, dict[str, Any]]:
        """The route and the call's keyword arguments for model ``i``; a model that cannot
        be routed, or has no key, fails here (before any request)."""
        t = self.targets[i]
        route = path.route(t)
        if route.error:
            raise unroutable_error(t, route.error)
        if path.missing_key(t):
            raise no_key_error(t)
        kw = self._kwargs(t, messages, tools)
        if params:
            kw.update(params)
            kw.setdefault("drop_params", True)
        choice.apply_effort(self, t, kw, path)
        if streaming:
            kw["stream"] = True
            kw["stream_options"] = {"include_usage": True}
        return route, kw

    # ------------------------------------------------------------------------ one call
    async def _try(
        self,
        path: ModelPath,
        t: ModelTarget,
        route: Route,
        kw: dict[str, Any],
        emit: Callable[[str], None] | None,
    ) -> Completion | LLMError:
        """One request and its whole answer (streamed through ``emit`` when given), or the
        error it failed with."""
        started = time.monotonic()
        try:
            async with asyncio.timeout(self.timeout + 5):
                resp = await path.send(kw, route, self.timeout)
            if emit is None:
                comp = _parse_response(resp)
            else:
                comp = await collect(resp, emit, self.timeout + 5)
        except asyncio.CancelledError:
            raise
        except LLMError as e:
            return e
        except Exception as e:
            return _classify(e, self.timeout, t)
        comp.model = t.model
        comp.cost = cost_of(route.prices, comp.usage)
        log.debug("llm call ok model=%s in %.2fs", t.model, time.monotonic() - started)
        return comp

    def _give_up(self, err: LLMError, attempt: int, has_next: bool) -> bool:
        if not err.retryable or attempt >= self.max_retries:
            return True
        ra = _retry_after(err.cause)
        if ra is None:
            return False
        # a long Retry-After, or a repeated 429 when another model can answer
        return ra > self.max_retry_after or (err.status == 429 and has_next and attempt >= 1)

    def _delay(self, attempt: int, err: LLMError) -> float:
        ra = _retry_after(err.cause)
        if ra is not None:
            return min(self.max_retry_after, max(ra, 0.0))
        return self.backoff.delay(attempt)

    def _broke_off(self, t: ModelTarget, err: LLMError) -> LLMError:
        log.warning(
            "llm stream broke off model=%s (%s) status=%s: %s",
            t.model,
            t.key,
            err.status,
            self._provider_message(err),
        )
        return LLMError(
            f"The model's answer broke off ({err.reason}). Please try again.",
            err.cause,
            status=err.status,
            kind="model" if err.kind == "down" else err.kind,  # it answered: not an outage
            reason=f"stream broke off: {err.reason}",
        )

    async def _attempt(
        self,
        i: int,
        messages: list[dict],
        tools: list[dict] | None,
        on_delta: Callable[[str], None] | None = None,
        params: dict[str, Any] | None = None,
    ) -> Completion:
        """One model of the chain with its retries.  With ``on_delta`` the answer is
        streamed; once a delta went out, a failure is final (no retry, no fallback: the
        user has seen part of this answer)."""
        t = self.targets[i]
        path = path_for(t.model, t.api_base)
        route, kw = self._request(path, i, messages, tools, params, on_delta is not None)
        emitted = False

        def emit(delta: str) -> None:
            nonlocal emitted
            emitted = True
            if on_delta is not None:
                on_delta(delta)

        attempt = 0
        while True:
            got = await self._try(path, t, route, kw, emit if on_delta is not None else None)
            if isinstance(got, Completion):
                return got
            if emitted:
                raise self._broke_off(t, got)
            if self._give_up(got, attempt, has_next=i + 1 < len(self.targets)):
                log.warning(
                    "llm call failed model=%s (%s) status=%s attempts=%d: %s",
                    t.model,
                    t.key,
                    got.status,
                    attempt + 1,
                    self._provider_message(got),
                )
                raise got
            wait = self._delay(attempt, got)
            log.info(
                "llm call failed model=%s status=%s error=%s; retry %d/%d in %.2fs",
                t.model,
                got.status,
                got.reason,
                attempt + 1,
                self.max_retries,
                wait,
            )
            attempt += 1
            await self.sleep(wait)

    def _provider_message(self, err: LLMError) -> str:
        """The provider's own words (or the exception's), secrets redacted, for the log."""
        cause = err.cause
        if cause is None:
            return err.user_message
        text = " ".join(str(cause).split())[:1000] or type(cause).__name__
        return f"{type(cause).__name__}: {scrub(text, self._secrets)}"

    # -------------------------------------------------------------------- the chain
    def _order(self, chain: list[int] | None = None) -> list[int]:
        """The models to try, in order: those of ``chain`` (default: the configured ones)
        not cooling down (all of them if none is)."""
        now = self.clock()
        chain = list(range(self.fallback_count + 1)) if chain is None else chain
        order = [i for i in chain if self._state[i].cooled_until <= now]
        if not order:  # every model is cooling down: try them all rather than none
            order = chain
        for i in chain:
            s = self._state[i]
            if i not in order:
                log.debug(
                    "skipping model=%s: cooling down %.0fs more after %s",
                    self.targets[i].model,
                    s.cooled_until - now,
                    s.last_reason,
                )
        return order

    def _cool(self, i: int, err: LLMError, last: bool) -> None:
        """Model ``i`` failed in a way the next may not: skip it for ``cooldown`` seconds."""
        t = self.targets[i]
        state = self._state[i]
        state.cooled_until = self.clock() + self.cooldown
        state.last_reason = err.reason
        if len(self.targets) > 1:
            log.warning(
                "model %s (%s) failed (%s): skipped for %.0fs%s",
                t.model,
                t.key,
                err.reason,
                self.cooldown,
                "" if last else "; trying the next model",
            )

    def _answered(
        self, i: int, failed: list[tuple[ModelTarget, LLMError]], comp: Completion
    ) -> None:
        """Model ``i`` answered: it is warm again, and the call is recorded (ON_CALL)."""
        t = self.targets[i]
        state = self._state[i]
        if state.cooled_until:
            state.cooled_until, state.last_reason = 0.0, ""
        if failed:
            log.info(
                "answered by model=%s (%s) after %s failed",
                t.model,
                t.key,
                ", ".join(f.model for f, _ in failed),
            )
        hook = ON_CALL.get()
        if hook is not None:
            try:
                hook(comp)
            except Exception:  # recording usage must never fail the call
                log.exception("recording the usage of a model call failed")

    # ------------------------------------------------------------------------- public
    async def complete(
        self,
        messages: list[dict],
        tools: list[dict] | None = None,
        *,
        on_delta: Callable[[str], None] | None = None,
        params: dict[str, Any] | None = None,
    ) -> Completion:
        """One chat completion from the first model of the chain that answers.  Raises
        :class:`LLMError` only.

        ``params`` are request parameters for this call only (``max_tokens``,
        ``temperature``, ``tool_choice``…, e.g. from an HTTP API client); a parameter the
        provider does not support is dropped (``drop_params``) rather than failing the call.

        With ``on_delta`` the answer is streamed (``stream=True``): every piece of content
        is passed to it as it arrives, and the Completion is the same as without (tool
        calls assembled, usage from the provider).  A model that fails before its first
        delta falls over to the next as usual; after it, the call fails."""
        order = self._order(choice.chain(self))
        for path in dict.fromkeys(
            path_for(self.targets[i].model, self.targets[i].api_base) for i in order
        ):
            await path.ready()
        failed: list[tuple[ModelTarget, LLMError]] = []
        for i in order:
            try:
                comp = await self._attempt(i, messages, tools, on_delta, params)
            except LLMError as err:
                failed.append((self.targets[i], err))
                if not err.failover:
                    raise
                self._cool(i, err, last=i == order[-1])
                continue
            self._answered(i, failed, comp)
            return comp
        raise _combined(failed)

    async def stream(
        self, messages: list[dict], tools: list[dict] | None = None
    ) -> AsyncIterator[str | Completion]:
        """The streamed call as an async iterator: text deltas (``str``) as they arrive,
        then the :class:`Completion`.  Raises :class:`LLMError` like ``complete``."""
        queue: asyncio.Queue[str | None] = asyncio.Queue()
        task = asyncio.create_task(self.complete(messages, tools, on_delta=queue.put_nowait))
        task.add_done_callback(lambda _t: queue.put_nowait(None))
        try:
            while (item := await queue.get()) is not None:
                yield item
            yield task.result()
        finally:
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task


def _combined(failed: list[tuple[ModelTarget, LLMError]]) -> LLMError:
    """The error of a call where every model of the chain failed: the only one, or one
    sentence naming each model's reason."""
    if len(failed) == 1:
        return failed[0][1]
    last = failed[-1][1]
    reasons = "; ".join(f"{t.model}: {e.reason}" for t, e in failed)
    kinds = {e.kind for _, e in failed}
    # down: no model answered, and none refused for a reason waiting would not mend
    kind = "config" if kinds == {"config"} else "down" if kinds <= {"down", "config"} else "model"
    return LLMError(
        f"None of the configured models answered ({reasons}). Please try again later.",
        last.cause,
        status=last.status,
        kind=kind,
        reason="all models failed",
    )
