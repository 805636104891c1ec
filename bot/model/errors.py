"""Errors of a model call: :class:`LLMError`, and :func:`_classify`, which maps whatever
litellm raised to one (its ``user_message`` one short true sentence, safe to show to the
user; ``retryable`` and ``failover`` set) on the exception's type and HTTP status.

Classification is a table of small rules tried in order; the first that recognises the
exception answers.  The provider's text is only consulted for the two cases litellm
reports as a plain 400 (no provider prefix, no key).
"""

from __future__ import annotations

import asyncio
import email.utils
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bot.model import litellm_path
from bot.config.providers import key_var
from bot.model.routing import ModelTarget


class LLMError(Exception):
    """The model call failed for good.  ``user_message`` is what the user should see.

    ``kind`` is ``"model"`` (the provider failed or refused), ``"down"`` (it did not answer:
    no connection, a timeout, a 5xx or a 429, which an outage is made of), ``"config"`` (the
    model is misconfigured: not routable, no key) or ``"budget"`` (the daily cost limit).
    ``failover`` says whether the next model of the chain should be tried; ``reason`` is a
    few words for a combined message ("HTTP 503", "connection failed")."""

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


_RETRY_STATUSES = {408, 409, 425, 429}


def no_key_message(model: str, key: str = "agent.model", api_base: str = "") -> str:
    """No key for ``model`` (named by the TOML ``key``): the fix names the variable of the
    model's own provider (``bot.config.providers``), never another provider's."""
    var = key_var(model, api_base)
    table = key.removesuffix(".model") if key.endswith(".model") else key
    export = f"`export {var}=...`" if var else "set the provider's key variable"
    named = f" {model} ({key})" if model else ""
    return (
        f"No API key is configured for the model{named}: {export} in the environment Chela "
        f"runs in (then restart), or name the variable holding the key in "
        f"{table}.api_key_env, or set {table}.api_base for a local server."
    )


_UNREACHABLE = (
    "The model is not reachable right now (connection failed). Please try again in a moment."
)
_CONNECTION_NAMES = (
    "APIConnectionError",
    "ServiceUnavailableError",
    "InternalServerError",
    "BadGatewayError",
)


def unroutable_message(model: str, key: str = "agent.model") -> str:
    name = model.rsplit("/", 1)[-1] or model
    return (
        f"The model string {model!r} ({key}) cannot be routed: litellm needs a provider prefix, "
        f'e.g. "ollama/{name}" or "openai/{name}" (with api_base for a local server).'
    )


def unroutable_error(target: ModelTarget, why: str) -> LLMError:
    """The model string cannot be routed (``why``: litellm's words); the next model may be."""
    return LLMError(
        unroutable_message(target.model, target.key),
        RuntimeError(why),
        kind="config",
        failover=True,
        reason="not routable",
    )


def no_key_error(target: ModelTarget) -> LLMError:
    """The provider needs an API key that is neither configured nor in the environment."""
    return LLMError(
        no_key_message(target.model, target.key, target.api_base),
        None,
        kind="config",
        failover=True,
        reason="no API key",
    )


def empty_answer() -> LLMError:
    return LLMError(
        "The model returned an empty answer. Please try again.",
        None,
        retryable=True,
        reason="empty answer",
    )


# ------------------------------------------------------------------ retry-after headers


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


def _seconds(value: str) -> float | None:
    try:
        return max(0.0, float(value))
    except ValueError:
        return None


def _retry_after_in(items: dict[str, str]) -> float | None:
    """Seconds from one header set: retry-after-ms, else retry-after (seconds or a date)."""
    ms = items.get("retry-after-ms")
    if ms:
        wait = _seconds(ms)
        if wait is not None:
            return wait / 1000.0
    ra = items.get("retry-after")
    if ra:
        wait = _seconds(ra)
        if wait is not None:
            return wait
        try:
            when = email.utils.parsedate_to_datetime(ra)
            return max(0.0, when.timestamp() - time.time())
        except (TypeError, ValueError):
            pass
    return None


def _retry_after(exc: BaseException | None) -> float | None:
    """Seconds from a Retry-After (or retry-after-ms) header on the error, if any."""
    if exc is None:
        return None
    for headers in _headers_of(exc):
        try:
            items = {str(k).lower(): str(v) for k, v in dict(headers).items()}
        except Exception:
            continue
        wait = _retry_after_in(items)
        if wait is not None:
            return wait
    return None


def _human_seconds(s: float) -> str:
    if s < 90:
        return f"{max(1, round(s))} seconds"
    if s < 90 * 60:
        return f"{round(s / 60)} minutes"
    return f"{s / 3600:.1f} hours"


# ------------------------------------------------------------------------ classification


@dataclass(frozen=True)
class _Seen:
    """One exception as the rules look at it."""

    exc: BaseException
    name: str
    status: int | None
    timeout: float
    target: ModelTarget | None

    def err(
        self, msg: str, retryable: bool, failover: bool, reason: str, kind: str = "model"
    ) -> LLMError:
        return LLMError(
            msg,
            self.exc,
            status=self.status,
            retryable=retryable,
            failover=failover,
            reason=reason,
            kind=kind,
        )


def _timed_out(s: _Seen) -> LLMError | None:
    if isinstance(s.exc, (asyncio.TimeoutError, TimeoutError)) or s.name in (
        "Timeout",
        "APITimeoutError",
    ):
        return s.err(
            f"The model did not answer within {s.timeout:g} seconds. Please try again in a moment.",
            True,
            True,
            "timed out",
            "down",
        )
    return None


def _too_long(s: _Seen) -> LLMError | None:
    litellm = litellm_path.loaded()
    light = getattr(s.exc, "context_overflow", False) is True  # openai_compat.ProviderError
    if light or (
        litellm is not None
        and isinstance(s.exc, getattr(litellm, "ContextWindowExceededError", ()))
    ):
        return s.err(
            "The conversation is too long for the model. Start a fresh session with /new and try again.",
            False,
            False,
            "context too long",
        )
    return None


def _no_prefix(s: _Seen) -> LLMError | None:
    if "LLM Provider NOT provided" in str(s.exc):
        t = s.target or ModelTarget("?")
        return s.err(unroutable_message(t.model, t.key), False, True, "not routable", "config")
    return None


def _no_key(s: _Seen) -> LLMError | None:
    low = str(s.exc).lower()
    if "api_key" in low and ("must be set" in low or "not set" in low or "missing" in low):
        t = s.target or ModelTarget("")
        return s.err(
            no_key_message(t.model, t.key, t.api_base), False, True, "no API key", "config"
        )
    return None


# status, litellm's exception name, message, reason: a refusal another model may not give
_REFUSALS = (
    (
        401,
        "AuthenticationError",
        "The model provider rejected the API key (HTTP 401). Check the configured key.",
        "key rejected (HTTP 401)",
    ),
    (
        403,
        "PermissionDeniedError",
        "The model provider refused access (HTTP 403). Check the key's permissions and the model name.",
        "access refused (HTTP 403)",
    ),
    (
        404,
        "NotFoundError",
        "The model or endpoint was not found (HTTP 404). Check the model name and api_base.",
        "not found (HTTP 404)",
    ),
)


def _refused(s: _Seen) -> LLMError | None:
    for status, name, msg, reason in _REFUSALS:
        if s.status == status or s.name == name:
            return s.err(msg, False, True, reason, "config")
    return None


def _rate_limited(s: _Seen) -> LLMError | None:
    if s.status != 429 and s.name != "RateLimitError":
        return None
    ra = _retry_after(s.exc)
    if ra and ra >= 60:
        msg = (
            f"The model is rate-limited right now (HTTP 429). The provider asks to wait "
            f"{_human_seconds(ra)}. Please try again later."
        )
    else:
        msg = "The model is rate-limited right now (HTTP 429). Please try again in a moment."
    return s.err(msg, True, True, "rate-limited (HTTP 429)", "down")


def _no_response(s: _Seen) -> LLMError | None:
    # litellm reports a refused or broken connection as a 500 with no HTTP response behind
    # it (no headers at all); every real answer has headers
    if s.status == 500 and not _headers_of(s.exc):
        return LLMError(
            _UNREACHABLE,
            s.exc,
            status=None,
            retryable=True,
            failover=True,
            reason="connection failed",
            kind="down",
        )
    return None


def _server_side(s: _Seen) -> LLMError | None:
    if s.status is not None and (s.status >= 500 or s.status in _RETRY_STATUSES):
        return s.err(
            f"The model is not reachable right now (HTTP {s.status}). Please try again in a moment.",
            True,
            True,
            f"HTTP {s.status}",
            "down",
        )
    return None


def _unreachable(s: _Seen) -> LLMError | None:
    if s.name in _CONNECTION_NAMES or isinstance(s.exc, (ConnectionError, OSError)):
        return s.err(_UNREACHABLE, True, True, "connection failed", "down")
    return None


def _rejected(s: _Seen) -> LLMError | None:
    if s.status is not None and 400 <= s.status < 500:
        return s.err(
            f"The model provider rejected the request (HTTP {s.status}). "
            "If it keeps happening, start a fresh session with /new.",
            False,
            False,
            f"HTTP {s.status}",
        )
    return None


# in order: the first rule that recognises the exception answers
_RULES: tuple[Callable[[_Seen], LLMError | None], ...] = (
    _timed_out,
    _too_long,
    _no_prefix,
    _no_key,
    _refused,
    _rate_limited,
    _no_response,
    _server_side,
    _unreachable,
    _rejected,
)


def _classify(exc: BaseException, timeout: float, target: ModelTarget | None = None) -> LLMError:
    """Map any exception from litellm to an LLMError (``retryable`` and ``failover`` set)."""
    seen = _Seen(exc, type(exc).__name__, _status_of(exc), timeout, target)
    for rule in _RULES:
        err = rule(seen)
        if err is not None:
            return err
    return seen.err(
        "Something went wrong while talking to the model. Please try again in a moment.",
        False,
        False,
        "failed",
    )
