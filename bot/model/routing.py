"""What is resolved once per model string (issue 19): the provider that routes it, whether
its chat path can be called on the event loop, and its prices from litellm's local cost map
(read as data); the cost of one call from its usage numbers.

The fast path: for providers whose chat path is async, :func:`_begin` does on the event
loop what ``litellm.acompletion`` does in a worker thread, skipping its thread hand-off and
per-call success machinery (cost calculation, logging payloads, model-info lookups).
"""

from __future__ import annotations

import datetime
import os
import uuid
from dataclasses import dataclass, field
from typing import Any

from bot.model.lite import _load_litellm

# "0" sends every call through litellm.acompletion (the thread hand-off path)
_INLINE_ENV = "CHELA_LLM_INLINE"

Prices = tuple[float, float, float, float]  # per token: in, out, cache read, cache write


@dataclass(frozen=True)
class ModelTarget:
    """One model of the chain: ``agent.model`` or an entry of ``agent.fallbacks``."""

    model: str
    api_base: str = ""
    api_key: str = field(default="", repr=False)
    key: str = "agent.model"  # the TOML key that names it (for messages)


# providers whose chat path in litellm returns a coroutine for acompletion=True without
# doing network work before it (checked by tests/integration/test_llm_fast_path.py); the others, and
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
    prices: Prices | None = None
    path: str = "litellm"  # or "openai_compat" (bot.model.openai_compat)


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


def _prices(litellm: Any, model: str, provider: str) -> Prices | None:
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


def cost_of(prices: Prices | None, usage: dict[str, int]) -> float:
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
