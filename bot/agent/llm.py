"""The model client (SPEC §12): one ``complete()`` call over litellm, with our own retries,
a fallback chain, cooldowns, honest errors, and usage and cost per call.

litellm is imported lazily (it costs ~2.3 s and ~160 MB); call :func:`warm_up` from a
thread at start-up to pay that early.  Errors reach callers only as :class:`LLMError`,
whose ``user_message`` is one short true sentence, safe to show to the user; the
provider's own message goes to the log (secrets redacted).

One retry loop owns retries (litellm's are off: ``num_retries=0``, ``max_retries=0``).  It
retries one model call, never a turn, so a tool that already ran is never run again.

Per-call overhead (issue 19): what can be resolved once per model is (routing, whether the
key is missing, prices from litellm's local cost map); the cost is computed from the usage
numbers here, and for providers whose chat path is async the call goes straight to
``litellm.completion(acompletion=True)`` on the event loop, skipping ``acompletion``'s
thread hand-off and its per-call success machinery (cost calculation, logging payloads,
model-info lookups).  Every other provider goes through ``litellm.acompletion`` as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import datetime
import email.utils
import inspect
import logging
import os
import random
import threading
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from bot.untrusted import valid_utf8
from channels.redact import scrub

log = logging.getLogger(__name__)

_litellm: Any = None
_import_lock = threading.Lock()
_HTTP_HANDLER_ENV = "EXPERIMENTAL_OPENAI_BASE_LLM_HTTP_HANDLER"
# "0" sends every call through litellm.acompletion (the thread hand-off path)
_INLINE_ENV = "CHELA_LLM_INLINE"


def _load_litellm() -> Any:
    global _litellm  # noqa: PLW0603 - one lazily imported module per process
    if _litellm is not None:
        return _litellm
    with _import_lock:
        if _litellm is None:
            os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
            # OpenAI-compatible providers: litellm's own HTTP handler instead of the openai SDK
            # client.  The SDK re-validates every request body against its TypedDicts (the
            # system prompt, history and tool schemas, every turn); measured with
            # bench/turn_bench.py that was 4.7 of 5.7 ms of CPU per call, and 1.9 ms with the
            # handler.  Same wire format; set the variable to "false" to go back.
            os.environ.setdefault(_HTTP_HANDLER_ENV, "true")
            import litellm

            litellm.suppress_debug_info = True
            for attr, value in (("telemetry", False), ("set_verbose", False)):
                if hasattr(litellm, attr):
                    with contextlib.suppress(Exception):
                        setattr(litellm, attr, value)
            logging.getLogger("LiteLLM").setLevel(logging.WARNING)
            _litellm = litellm
    return _litellm


def warm_up() -> None:
    """Import litellm now (blocking; run it in a thread, e.g. ``asyncio.to_thread(warm_up)``)."""
    _load_litellm()


# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # raw JSON text as the model produced it


@dataclass
class Completion:
    text: str
    tool_calls: list[ToolCall] = field(default_factory=list)
    # prompt_tokens, completion_tokens, total_tokens; cached_tokens and cache_write_tokens
    # when the provider reports any
    usage: dict[str, int] = field(default_factory=dict)
    raw_finish_reason: str | None = None
    model: str = ""  # the model string that answered (a fallback's, after a failover)
    cost: float = 0.0  # USD, from litellm's local cost map; 0 when the model is not in it


@dataclass(frozen=True)
class ModelTarget:
    """One model of the chain: ``agent.model`` or an entry of ``agent.fallbacks``."""

    model: str
    api_base: str = ""
    api_key: str = field(default="", repr=False)
    key: str = "agent.model"  # the TOML key that names it (for messages)


class LLMError(Exception):
    """The model call failed for good.  ``user_message`` is what the user should see.

    ``kind`` is ``"model"`` (the provider failed or refused), ``"config"`` (the model is
    misconfigured: not routable, no key) or ``"budget"`` (the daily cost limit).  ``failover``
    says whether the next model of the chain should be tried; ``reason`` is a few words for
    a combined message ("HTTP 503", "connection failed")."""

    def __init__(
        self,
        user_message: str,
        cause: BaseException | None = None,
        *,
        status: int | None = None,
        retryable: bool = False,
        kind: str = "model",
        failover: bool = False,
        reason: str = "",
    ) -> None:
        super().__init__(user_message)
        self.user_message = user_message
        self.cause = cause
        self.status = status
        self.retryable = retryable
        self.kind = kind
        self.failover = failover
        self.reason = reason or (f"HTTP {status}" if status else "failed")


# --------------------------------------------------------------------------------------
# error classification

_RETRY_STATUSES = {408, 409, 425, 429}
_NO_KEY_MESSAGE = "No API key is configured for the model. Set agent.api_key_env (or agent.api_base for a local server)."


def _status_of(exc: BaseException) -> int | None:
    for attr in ("status_code", "status"):
        v = getattr(exc, attr, None)
        if isinstance(v, int) and 100 <= v <= 599:
            return v
    resp = getattr(exc, "response", None)
    v = getattr(resp, "status_code", None)
    if isinstance(v, int) and 100 <= v <= 599:
        return v
    return None


def _headers_of(exc: BaseException) -> list[Any]:
    out = []
    for h in (getattr(exc, "litellm_response_headers", None), getattr(exc, "headers", None)):
        if h:
            out.append(h)
    resp = getattr(exc, "response", None)
    h = getattr(resp, "headers", None)
    if h:
        out.append(h)
    return out


def _retry_after(exc: BaseException | None) -> float | None:
    """Seconds from a Retry-After (or retry-after-ms) header on the error, if any."""
    if exc is None:
        return None
    for headers in _headers_of(exc):
        try:
            items = {str(k).lower(): str(v) for k, v in dict(headers).items()}
        except Exception:
            continue
        ms = items.get("retry-after-ms")
        if ms:
            try:
                return max(0.0, float(ms) / 1000.0)
            except ValueError:
                pass
        ra = items.get("retry-after")
        if ra:
            try:
                return max(0.0, float(ra))
            except ValueError:
                try:
                    when = email.utils.parsedate_to_datetime(ra)
                    return max(0.0, when.timestamp() - time.time())
                except (TypeError, ValueError):
                    pass
    return None


def _human_seconds(s: float) -> str:
    if s < 90:
        return f"{max(1, round(s))} seconds"
    if s < 90 * 60:
        return f"{round(s / 60)} minutes"
    return f"{s / 3600:.1f} hours"


def unroutable_message(model: str, key: str = "agent.model") -> str:
    name = model.rsplit("/", 1)[-1] or model
    return (
        f"The model string {model!r} ({key}) cannot be routed: litellm needs a provider prefix, "
        f'e.g. "ollama/{name}" or "openai/{name}" (with api_base for a local server).'
    )


def _classify(exc: BaseException, timeout: float, target: ModelTarget | None = None) -> LLMError:
    """Map any exception from litellm to an LLMError (``retryable`` and ``failover`` set),
    on its type and HTTP status; the provider's text is only consulted for the two cases
    litellm reports as a plain 400 (no provider prefix, no key)."""
    litellm = _litellm
    name = type(exc).__name__
    status = _status_of(exc)

    def err(
        msg: str, retryable: bool, failover: bool, reason: str, kind: str = "model"
    ) -> LLMError:
        return LLMError(
            msg,
            exc,
            status=status,
            retryable=retryable,
            failover=failover,
            reason=reason,
            kind=kind,
        )

    if isinstance(exc, (asyncio.TimeoutError, TimeoutError)) or name in (
        "Timeout",
        "APITimeoutError",
    ):
        return err(
            f"The model did not answer within {timeout:g} seconds. Please try again in a moment.",
            True,
            True,
            "timed out",
        )
    if litellm is not None and isinstance(exc, getattr(litellm, "ContextWindowExceededError", ())):
        return err(
            "The conversation is too long for the model. Start a fresh session with /new and try again.",
            False,
            False,
            "context too long",
        )
    text = str(exc)
    if "LLM Provider NOT provided" in text:
        t = target or ModelTarget("?")
        return err(unroutable_message(t.model, t.key), False, True, "not routable", "config")
    low = text.lower()
    if "api_key" in low and ("must be set" in low or "not set" in low or "missing" in low):
        return err(_NO_KEY_MESSAGE, False, True, "no API key", "config")
    if status == 401 or name == "AuthenticationError":
        return err(
            "The model provider rejected the API key (HTTP 401). Check the configured key.",
            False,
            True,
            "key rejected (HTTP 401)",
            "config",
        )
    if status == 403 or name == "PermissionDeniedError":
        return err(
            "The model provider refused access (HTTP 403). Check the key's permissions and the model name.",
            False,
            True,
            "access refused (HTTP 403)",
            "config",
        )
    if status == 404 or name == "NotFoundError":
        return err(
            "The model or endpoint was not found (HTTP 404). Check the model name and api_base.",
            False,
            True,
            "not found (HTTP 404)",
            "config",
        )
    if status == 429 or name == "RateLimitError":
        ra = _retry_after(exc)
        wait = f" The provider asks to wait {_human_seconds(ra)}." if ra and ra >= 60 else ""
        return err(
            f"The model is rate-limited right now (HTTP 429).{wait} Please try again later."
            if wait
            else "The model is rate-limited right now (HTTP 429). Please try again in a moment.",
            True,
            True,
            "rate-limited (HTTP 429)",
        )
    if status == 500 and not _headers_of(exc):
        # litellm reports a refused or broken connection as a 500 with no HTTP response
        # behind it (no headers at all); every real answer has headers
        return LLMError(
            "The model is not reachable right now (connection failed). Please try again in a moment.",
            exc,
            status=None,
            retryable=True,
            failover=True,
            reason="connection failed",
        )
    if status is not None and (status >= 500 or status in _RETRY_STATUSES):
        return err(
            f"The model is not reachable right now (HTTP {status}). Please try again in a moment.",
            True,
            True,
            f"HTTP {status}",
        )
    if name in (
        "APIConnectionError",
        "ServiceUnavailableError",
        "InternalServerError",
        "BadGatewayError",
    ) or isinstance(exc, (ConnectionError, OSError)):
        return err(
            "The model is not reachable right now (connection failed). Please try again in a moment.",
            True,
            True,
            "connection failed",
        )
    if status is not None and 400 <= status < 500:
        return err(
            f"The model provider rejected the request (HTTP {status}). "
            "If it keeps happening, start a fresh session with /new.",
            False,
            False,
            f"HTTP {status}",
        )
    return err(
        "Something went wrong while talking to the model. Please try again in a moment.",
        False,
        False,
        "failed",
    )


# --------------------------------------------------------------------------------------


def _get(obj: Any, key: str, default: Any = None) -> Any:
    if obj is None:
        return default
    if isinstance(obj, dict):
        return obj.get(key, default)
    return getattr(obj, key, default)


def _int(v: Any) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else 0


def usage_numbers(u: Any) -> dict[str, int]:
    """Token counts of a response's ``usage`` (OpenAI's shape, or litellm's normalised one):
    prompt, completion, total, and the prompt tokens read from (or written to) a cache."""
    usage: dict[str, int] = {}
    for k in ("prompt_tokens", "completion_tokens", "total_tokens"):
        v = _get(u, k)
        if isinstance(v, int):
            usage[k] = v
    cached = _int(_get(_get(u, "prompt_tokens_details"), "cached_tokens")) or _int(
        _get(u, "cache_read_input_tokens")
    )
    if cached:
        usage["cached_tokens"] = cached
    written = _int(_get(u, "cache_creation_input_tokens"))
    if written:
        usage["cache_write_tokens"] = written
    return usage


def _parse_response(resp: Any) -> Completion:
    choices = _get(resp, "choices") or []
    if not choices:
        raise LLMError(
            "The model returned an empty answer. Please try again.",
            None,
            retryable=True,
            reason="empty answer",
        )
    choice = choices[0]
    msg = _get(choice, "message")
    text = _get(msg, "content") or ""
    if not isinstance(text, str):  # content parts
        text = "".join(_get(p, "text", "") or "" for p in text)
    text = valid_utf8(text)
    calls: list[ToolCall] = []
    for tc in _get(msg, "tool_calls") or []:
        fn = _get(tc, "function")
        name = _get(fn, "name") or ""
        args = _get(fn, "arguments")
        if args is None:
            args = ""
        elif not isinstance(args, str):
            import json

            args = json.dumps(args)
        calls.append(
            ToolCall(
                id=_get(tc, "id") or f"call_{uuid.uuid4().hex[:16]}",
                name=valid_utf8(name),
                arguments=valid_utf8(args),
            )
        )
    return Completion(
        text=text,
        tool_calls=calls,
        usage=usage_numbers(_get(resp, "usage")),
        raw_finish_reason=_get(choice, "finish_reason"),
    )


# --------------------------------------------------------------------------------------
# what is resolved once per model

# providers whose chat path in litellm returns a coroutine for acompletion=True without
# doing network work before it (checked by tests/test_llm_fast_path.py); the others, and
# anything unknown, go through litellm.acompletion
INLINE_PROVIDERS = frozenset(
    {
        "openai",
        "custom_openai",
        "hosted_vllm",
        "lm_studio",
        "openrouter",
        "deepseek",
        "groq",
        "xai",
        "mistral",
        "anthropic",
        "gemini",
        "together_ai",
        "fireworks_ai",
        "deepinfra",
        "perplexity",
        "cerebras",
        "nvidia_nim",
        "ollama_chat",
    }
)


@dataclass
class _Route:
    provider: str = ""
    model: str = ""  # the provider's model name (litellm's, without the prefix)
    error: str = ""  # why the model string cannot be routed ("" = it can)
    inline: bool = False
    prices: tuple[float, float, float, float] | None = None  # in, out, cache read, cache write


_routes: dict[tuple[str, str], _Route] = {}


def _resolve(litellm: Any, model: str, api_base: str) -> _Route:
    """Provider routing and prices of one model string, from litellm, once per process."""
    key = (model, api_base)
    route = _routes.get(key)
    if route is not None:
        return route
    route = _Route()
    try:
        resolved, provider, _key, _base = litellm.get_llm_provider(
            model=model, api_base=api_base or None
        )
        route.provider, route.model = str(provider or ""), str(resolved or model)
    except Exception as e:
        route.error = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    if not route.error:
        route.inline = route.provider in INLINE_PROVIDERS and os.environ.get(_INLINE_ENV) != "0"
        route.prices = _prices(litellm, route.model, route.provider)
    _routes[key] = route
    return route


def _prices(litellm: Any, model: str, provider: str) -> tuple[float, float, float, float] | None:
    """Per-token prices from litellm's local cost map; None when the model is not in it."""
    try:
        info = litellm.get_model_info(model=model, custom_llm_provider=provider)
    except Exception:
        return None

    def num(k: str) -> float:
        v = info.get(k)
        return float(v) if isinstance(v, (int, float)) and v >= 0 else 0.0

    inp, out = num("input_cost_per_token"), num("output_cost_per_token")
    if not inp and not out:
        return None
    return (
        inp,
        out,
        num("cache_read_input_token_cost") or inp,
        num("cache_creation_input_token_cost") or inp,
    )


def routing_error(model: str, api_base: str = "") -> str:
    """Why litellm cannot route this model string ("" when it can).  Imports litellm."""
    return _resolve(_load_litellm(), model, api_base).error


def cost_of(prices: tuple[float, float, float, float] | None, usage: dict[str, int]) -> float:
    """USD for one call's token counts.  Cached and cache-write tokens are part of the
    prompt tokens (OpenAI's and litellm's convention) and are priced at their own rates."""
    if not prices:
        return 0.0
    inp, out, read, write = prices
    prompt = usage.get("prompt_tokens", 0)
    cached = min(usage.get("cached_tokens", 0), prompt)
    written = min(usage.get("cache_write_tokens", 0), prompt - cached)
    plain = prompt - cached - written
    return plain * inp + cached * read + written * write + usage.get("completion_tokens", 0) * out


# litellm internals the fast path uses; looked up once, None when this litellm lacks them
_fast: dict[str, Any] = {}


def _fast_parts(litellm: Any) -> dict[str, Any] | None:
    if "ok" not in _fast:
        try:
            from litellm.litellm_core_utils.exception_mapping_utils import exception_type
            from litellm.utils import Rules, function_setup

            _fast.update(ok=True, setup=function_setup, rules=Rules(), map=exception_type)
        except Exception:  # a litellm without them: everything goes through acompletion
            _fast["ok"] = False
    return _fast if _fast.get("ok") else None


def _begin(litellm: Any, parts: dict[str, Any], kw: dict[str, Any]) -> Any:
    """What ``litellm.acompletion`` runs in a worker thread, run here: the call's logging
    object, then ``completion(acompletion=True)``, whose sync part (parameter mapping,
    request building; its errors already mapped) returns the request's coroutine."""
    call = dict(kw, litellm_call_id=uuid.uuid4().hex)
    logging_obj, call = parts["setup"](
        "acompletion", parts["rules"], datetime.datetime.now(), **call
    )
    call["litellm_logging_obj"] = logging_obj
    call["acompletion"] = True
    return litellm.completion(**call)


def _map_error(parts: dict[str, Any], e: Exception, route: _Route) -> Exception:
    """A provider handler's raw exception as litellm's typed one (what acompletion does)."""
    try:
        parts["map"](
            model=route.model,
            custom_llm_provider=route.provider,
            original_exception=e,
            completion_kwargs={},
            extra_kwargs={},
        )
    except Exception as mapped:  # exception_type always raises the mapped exception
        return mapped
    return e


# --------------------------------------------------------------------------------------

# called with every Completion a model call returned (usage and cost, SPEC §12); the agent
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
    """Talks to a chain of models through litellm.  Safe to share across concurrent turns.

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
        self.timeout = timeout
        self.max_retries = max(0, int(max_retries))
        self.backoff_base = backoff_base
        self.max_backoff = max_backoff
        self.max_retry_after = max_retry_after
        self.cooldown = max(0.0, float(cooldown))
        self.extra = dict(extra or {})
        self._secrets = tuple(s for s in (*secrets, *(t.api_key for t in self.targets)) if s)
        self.clock = clock
        self.sleep = sleep
        self._key_missing: dict[int, bool] = {}

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

    def __repr__(self) -> str:  # never show the key
        return f"LLMClient(model={self.model!r}, api_base={self.api_base!r}, fallbacks={len(self.targets) - 1})"

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

    def _missing_key(self, litellm: Any, i: int) -> bool:
        """True if the provider needs an API key that is neither configured nor in the env.

        Checked before the first call (then remembered), so a missing key is named at once
        instead of surfacing as whatever the provider or the network answers without one.
        Only ``*_API_KEY`` variables count: other credentials (cloud projects, local bases)
        are left to the provider.
        """
        missing = self._key_missing.get(i)
        if missing is None:
            t = self.targets[i]
            missing = False
            if not t.api_key and not t.api_base:
                try:
                    found = litellm.validate_environment(model=t.model)
                    missing = any(
                        str(k).endswith("_API_KEY") for k in found.get("missing_keys") or []
                    )
                except Exception:
                    missing = False
            self._key_missing[i] = missing
        return missing

    def _delay(self, attempt: int, err: LLMError) -> float:
        ra = _retry_after(err.cause)
        if ra is not None:
            return min(self.max_retry_after, max(ra, 0.0))
        backoff = min(self.max_backoff, self.backoff_base * (2**attempt))
        return backoff * (0.8 + 0.4 * random.random())  # jitter

    # ------------------------------------------------------------------------ one call
    async def _send(self, litellm: Any, route: _Route, kw: dict[str, Any]) -> Any:
        """One request to the provider, litellm's typed exceptions on failure."""
        parts = _fast_parts(litellm) if route.inline else None
        if parts is None:
            return await litellm.acompletion(**kw)
        pending = _begin(litellm, parts, kw)
        if not inspect.isawaitable(pending):  # answered synchronously after all: keep it,
            route.inline = False  # and use acompletion (a worker thread) from now on
            return pending
        try:
            resp = await pending
        except asyncio.CancelledError:
            raise
        except Exception as e:
            raise _map_error(parts, e, route) from e
        if hasattr(resp, "set_logging_event_loop"):  # a stream (stream=True)
            resp.set_logging_event_loop(loop=asyncio.get_running_loop())
        return resp

    async def _collect(self, stream: Any, emit: Callable[[str], None]) -> Completion:
        """A streamed answer as the Completion ``_parse_response`` would build: content
        deltas joined (each passed to ``emit`` as it arrives), tool-call deltas assembled
        by their index, usage from the final chunk (``stream_options.include_usage``).
        Each chunk must arrive within the call's timeout."""
        parts: list[str] = []
        calls: dict[int, list[str]] = {}  # index -> [id, name, arguments]
        finish: str | None = None
        usage: dict[str, int] = {}
        saw_choice = False
        it = stream.__aiter__()
        try:
            while True:
                try:
                    async with asyncio.timeout(self.timeout + 5):
                        chunk = await it.__anext__()
                except StopAsyncIteration:
                    break
                u = _get(chunk, "usage")
                if u:
                    usage = usage_numbers(u) or usage
                choices = _get(chunk, "choices") or []
                if not choices:
                    continue
                saw_choice = True
                choice = choices[0]
                delta = _get(choice, "delta")
                content = _get(delta, "content")
                if content and not isinstance(content, str):  # content parts
                    content = "".join(_get(p, "text", "") or "" for p in content)
                if content:
                    parts.append(content)
                    emit(content)
                for tc in _get(delta, "tool_calls") or []:
                    idx = _get(tc, "index")
                    if not isinstance(idx, int):
                        idx = len(calls) if _get(tc, "id") or not calls else max(calls)
                    slot = calls.setdefault(idx, ["", "", ""])
                    if _get(tc, "id"):
                        slot[0] = str(_get(tc, "id"))
                    fn = _get(tc, "function")
                    name = _get(fn, "name")
                    if name and name != slot[1]:
                        slot[1] += name  # names come whole (OpenAI) or in pieces
                    args = _get(fn, "arguments")
                    if args:
                        if not isinstance(args, str):
                            import json

                            args = json.dumps(args)
                        slot[2] += args
                reason = _get(choice, "finish_reason")
                if reason:
                    finish = reason
        finally:
            await _close_stream(stream)
        if not saw_choice:
            raise LLMError(
                "The model returned an empty answer. Please try again.",
                None,
                retryable=True,
                reason="empty answer",
            )
        return Completion(
            text=valid_utf8("".join(parts)),
            tool_calls=[
                ToolCall(
                    id=slot[0] or f"call_{uuid.uuid4().hex[:16]}",
                    name=valid_utf8(slot[1]),
                    arguments=valid_utf8(slot[2]),
                )
                for _, slot in sorted(calls.items())
            ],
            usage=usage,
            raw_finish_reason=finish,
        )

    async def _attempt(
        self,
        litellm: Any,
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
        route = _resolve(litellm, t.model, t.api_base)
        if route.error:
            raise LLMError(
                unroutable_message(t.model, t.key),
                RuntimeError(route.error),
                kind="config",
                failover=True,
                reason="not routable",
            )
        if self._missing_key(litellm, i):
            raise LLMError(
                _NO_KEY_MESSAGE
                if i == 0
                else f"No API key is configured for {t.model} ({t.key}): set its api_key_env.",
                None,
                kind="config",
                failover=True,
                reason="no API key",
            )
        kw = self._kwargs(t, messages, tools)
        if params:
            kw.update(params)
            kw.setdefault("drop_params", True)
        emitted = False

        def emit(delta: str) -> None:
            nonlocal emitted
            emitted = True
            if on_delta is not None:
                on_delta(delta)

        if on_delta is not None:
            kw["stream"] = True
            kw["stream_options"] = {"include_usage": True}
        attempt = 0
        while True:
            started = time.monotonic()
            try:
                async with asyncio.timeout(self.timeout + 5):
                    resp = await self._send(litellm, route, kw)
                if on_delta is None:
                    comp = _parse_response(resp)
                else:
                    comp = await self._collect(resp, emit)
                comp.model = t.model
                comp.cost = cost_of(route.prices, comp.usage)
                log.debug("llm call ok model=%s in %.2fs", t.model, time.monotonic() - started)
                return comp
            except asyncio.CancelledError:
                raise
            except LLMError as e:
                err = e
            except Exception as e:
                err = _classify(e, self.timeout, t)
            if emitted:
                log.warning(
                    "llm stream broke off model=%s (%s) status=%s: %s",
                    t.model,
                    t.key,
                    err.status,
                    self._provider_message(err),
                )
                raise LLMError(
                    f"The model's answer broke off ({err.reason}). Please try again.",
                    err.cause,
                    status=err.status,
                    kind=err.kind,
                    reason=f"stream broke off: {err.reason}",
                )
            has_next = i + 1 < len(self.targets)
            ra = _retry_after(err.cause)
            give_up = not err.retryable or attempt >= self.max_retries
            if not give_up and ra is not None:
                # a long Retry-After, or a repeated 429 when another model can answer
                give_up = ra > self.max_retry_after or (
                    err.status == 429 and has_next and attempt >= 1
                )
            if give_up:
                log.warning(
                    "llm call failed model=%s (%s) status=%s attempts=%d: %s",
                    t.model,
                    t.key,
                    err.status,
                    attempt + 1,
                    self._provider_message(err),
                )
                raise err
            wait = self._delay(attempt, err)
            log.info(
                "llm call failed model=%s status=%s error=%s; retry %d/%d in %.2fs",
                t.model,
                err.status,
                err.reason,
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
        provider does not support is dropped by litellm rather than failing the call.

        With ``on_delta`` the answer is streamed (``stream=True``): every piece of content
        is passed to it as it arrives, and the Completion is the same as without (tool
        calls assembled, usage from the provider).  A model that fails before its first
        delta falls over to the next as usual; after it, the call fails."""
        litellm = _litellm or await asyncio.to_thread(_load_litellm)
        now = self.clock()
        order = [i for i, s in enumerate(self._state) if s.cooled_until <= now]
        if not order:  # every model is cooling down: try them all rather than none
            order = list(range(len(self.targets)))
        for i, s in enumerate(self._state):
            if i not in order:
                log.debug(
                    "skipping model=%s: cooling down %.0fs more after %s",
                    self.targets[i].model,
                    s.cooled_until - now,
                    s.last_reason,
                )
        failed: list[tuple[ModelTarget, LLMError]] = []
        for i in order:
            t = self.targets[i]
            try:
                comp = await self._attempt(litellm, i, messages, tools, on_delta, params)
            except LLMError as err:
                failed.append((t, err))
                if not err.failover:
                    raise
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
                        "; trying the next model" if i != order[-1] else "",
                    )
                continue
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


async def _close_stream(stream: Any) -> None:
    """Close a stream that was not read to its end (a failure, a cancelled turn) so its
    connection goes back to the pool."""
    for target in (stream, getattr(stream, "completion_stream", None)):
        close = getattr(target, "aclose", None)
        if close is not None:
            with contextlib.suppress(Exception):
                await close()
            return


def _combined(failed: list[tuple[ModelTarget, LLMError]]) -> LLMError:
    """The error of a call where every model of the chain failed: the only one, or one
    sentence naming each model's reason."""
    if len(failed) == 1:
        return failed[0][1]
    last = failed[-1][1]
    reasons = "; ".join(f"{t.model}: {e.reason}" for t, e in failed)
    kind = "config" if all(e.kind == "config" for _, e in failed) else "model"
    return LLMError(
        f"None of the configured models answered ({reasons}). Please try again later.",
        last.cause,
        status=last.status,
        kind=kind,
        reason="all models failed",
    )


__all__ = [
    "ON_CALL",
    "Completion",
    "LLMClient",
    "LLMError",
    "ModelTarget",
    "ToolCall",
    "cost_of",
    "routing_error",
    "unroutable_message",
    "usage_numbers",
    "warm_up",
]
