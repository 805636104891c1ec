"""The model client: one ``complete()`` call over litellm, with our own bounded retries.

litellm is imported lazily (it costs ~2.3 s and ~160 MB); call :func:`warm_up` from a
thread at start-up to pay that early.  Errors reach callers only as :class:`LLMError`,
whose ``user_message`` is short and safe to show to the user.
"""

from __future__ import annotations

import asyncio
import email.utils
import contextlib
import logging
import os
import random
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from bot.untrusted import valid_utf8

log = logging.getLogger(__name__)

_litellm: Any = None
_import_lock = threading.Lock()
_HTTP_HANDLER_ENV = "EXPERIMENTAL_OPENAI_BASE_LLM_HTTP_HANDLER"


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
    usage: dict[str, int] = field(default_factory=dict)
    raw_finish_reason: str | None = None


class LLMError(Exception):
    """The model call failed for good.  ``user_message`` is what the user should see."""

    def __init__(
        self,
        user_message: str,
        cause: BaseException | None = None,
        *,
        status: int | None = None,
        retryable: bool = False,
    ) -> None:
        super().__init__(user_message)
        self.user_message = user_message
        self.cause = cause
        self.status = status
        self.retryable = retryable


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


def _retry_after(exc: BaseException) -> float | None:
    """Seconds from a Retry-After (or retry-after-ms) header on the error, if any."""
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


def _classify(exc: BaseException, timeout: float) -> LLMError:
    """Map any exception from litellm to an LLMError (with ``retryable`` set)."""
    litellm = _litellm
    name = type(exc).__name__
    status = _status_of(exc)

    def err(msg: str, retryable: bool) -> LLMError:
        return LLMError(msg, exc, status=status, retryable=retryable)

    if isinstance(exc, (asyncio.TimeoutError, TimeoutError)) or name in (
        "Timeout",
        "APITimeoutError",
    ):
        return err(
            f"The model did not answer within {timeout:g} seconds. Please try again in a moment.",
            True,
        )
    if litellm is not None and isinstance(exc, getattr(litellm, "ContextWindowExceededError", ())):
        return err(
            "The conversation is too long for the model. Start a fresh session with /new and try again.",
            False,
        )
    text = str(exc).lower()
    if "api_key" in text and ("must be set" in text or "not set" in text or "missing" in text):
        return err(_NO_KEY_MESSAGE, False)
    if status == 401 or name == "AuthenticationError":
        return err(
            "The model provider rejected the API key (HTTP 401). Check the configured key.", False
        )
    if status == 403 or name == "PermissionDeniedError":
        return err(
            "The model provider refused access (HTTP 403). Check the key's permissions and the model name.",
            False,
        )
    if status == 404 or name == "NotFoundError":
        return err(
            "The model or endpoint was not found (HTTP 404). Check the model name and api_base.",
            False,
        )
    if status == 429 or name == "RateLimitError":
        return err(
            "The model is rate-limited right now (HTTP 429). Please try again in a moment.", True
        )
    if status == 500 and not _headers_of(exc):
        # litellm reports a refused or broken connection as a 500 with no HTTP response
        # behind it (no headers at all); every real answer has headers
        return LLMError(
            "The model is not reachable right now (connection failed). Please try again in a moment.",
            exc,
            status=None,
            retryable=True,
        )
    if status is not None and status >= 500:
        return err(
            f"The model is not reachable right now (HTTP {status}). Please try again in a moment.",
            True,
        )
    if status in _RETRY_STATUSES:
        return err(
            f"The model is not reachable right now (HTTP {status}). Please try again in a moment.",
            True,
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
        )
    if status is not None and 400 <= status < 500:
        return err(
            f"The model rejected the request (HTTP {status}). Try rephrasing, or start a fresh session with /new.",
            False,
        )
    return err(
        "Something went wrong while talking to the model. Please try again in a moment.", False
    )


# --------------------------------------------------------------------------------------


def _get(obj: Any, key: str, default: Any = None) -> Any:
    if obj is None:
        return default
    if isinstance(obj, dict):
        return obj.get(key, default)
    return getattr(obj, key, default)


def _parse_response(resp: Any) -> Completion:
    choices = _get(resp, "choices") or []
    if not choices:
        raise LLMError(
            "The model returned an empty answer. Please try again.", None, retryable=True
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
    u = _get(resp, "usage")
    usage: dict[str, int] = {}
    for k in ("prompt_tokens", "completion_tokens", "total_tokens"):
        v = _get(u, k)
        if isinstance(v, int):
            usage[k] = v
    return Completion(
        text=text, tool_calls=calls, usage=usage, raw_finish_reason=_get(choice, "finish_reason")
    )


class LLMClient:
    """Talks to one model through litellm.  Safe to share across concurrent turns."""

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
        max_retry_after: float = 60.0,
    ) -> None:
        self.model = model
        self.api_base = api_base
        self._api_key = api_key
        self.timeout = timeout
        self.max_retries = max(0, int(max_retries))
        self.backoff_base = backoff_base
        self.max_backoff = max_backoff
        self.max_retry_after = max_retry_after
        self.extra = dict(extra or {})
        self._key_missing: bool | None = None

    def __repr__(self) -> str:  # never show the key
        return f"LLMClient(model={self.model!r}, api_base={self.api_base!r})"

    def _kwargs(self, messages: list[dict], tools: list[dict] | None) -> dict[str, Any]:
        kw: dict[str, Any] = dict(self.extra)
        kw.update(
            model=self.model, messages=messages, timeout=self.timeout, num_retries=0, max_retries=0
        )
        if self.api_base:
            kw["api_base"] = self.api_base
        key = self._api_key or ("sk-local" if self.api_base else "")
        if key:
            kw["api_key"] = key
        if tools:
            kw["tools"] = tools
        return kw

    def _missing_key(self, litellm: Any) -> bool:
        """True if the provider needs an API key that is neither configured nor in the env.

        Checked before the first call (then remembered), so a missing key is named at once
        instead of surfacing as whatever the provider or the network answers without one.
        Only ``*_API_KEY`` variables count: other credentials (cloud projects, local bases)
        are left to the provider.
        """
        if self._key_missing is None:
            missing = False
            if not self._api_key and not self.api_base:
                try:
                    found = litellm.validate_environment(model=self.model)
                    missing = any(
                        str(k).endswith("_API_KEY") for k in found.get("missing_keys") or []
                    )
                except Exception:
                    missing = False
            self._key_missing = missing
        return self._key_missing

    def _delay(self, attempt: int, err: LLMError) -> float:
        ra = _retry_after(err.cause) if err.cause is not None else None
        backoff = min(self.max_backoff, self.backoff_base * (2**attempt))
        backoff *= 0.8 + 0.4 * random.random()  # jitter
        if ra is not None:
            return min(self.max_retry_after, max(ra, 0.0))
        return backoff

    async def complete(self, messages: list[dict], tools: list[dict] | None = None) -> Completion:
        """One chat completion (not streamed).  Raises :class:`LLMError` only."""
        litellm = _litellm or await asyncio.to_thread(_load_litellm)
        if self._missing_key(litellm):
            log.warning("llm call not made model=%s: no API key configured", self.model)
            raise LLMError(_NO_KEY_MESSAGE, None, retryable=False)
        kw = self._kwargs(messages, tools)
        attempt = 0
        while True:
            started = time.monotonic()
            try:
                resp = await asyncio.wait_for(litellm.acompletion(**kw), timeout=self.timeout + 5)
                completion = _parse_response(resp)
                log.debug("llm call ok model=%s in %.2fs", self.model, time.monotonic() - started)
                return completion
            except asyncio.CancelledError:
                raise
            except LLMError as e:
                err = e
            except Exception as e:
                err = _classify(e, self.timeout)
            cause = err.cause
            detail = f"{type(cause).__name__}" if cause is not None else "empty response"
            if not err.retryable or attempt >= self.max_retries:
                log.warning(
                    "llm call failed model=%s status=%s error=%s attempts=%d",
                    self.model,
                    err.status,
                    detail,
                    attempt + 1,
                )
                raise err
            wait = self._delay(attempt, err)
            log.info(
                "llm call failed model=%s status=%s error=%s; retry %d/%d in %.2fs",
                self.model,
                err.status,
                detail,
                attempt + 1,
                self.max_retries,
                wait,
            )
            attempt += 1
            await asyncio.sleep(wait)
