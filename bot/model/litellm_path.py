"""The litellm path: every model the light path does not serve, and the one place litellm is
imported.

Importing litellm costs ~2 s of CPU and ~160 MB, so it happens only when a configured model
needs it (``bot.model.paths.litellm_needed``), in a *daemon* thread started as early as the
caller likes (:func:`start`): ``asyncio.run`` joins executor threads at exit, a daemon thread
does not hold a stop.  Callers on the event loop await :func:`litellm`; code in a thread or
a command line calls :func:`warm_up`; :func:`loaded` is the module once imported, else None.

Only litellm's public API is used: ``acompletion``, ``aembedding``, ``get_llm_provider``,
``get_model_info``, ``validate_environment``, ``get_supported_openai_params`` and its
documented settings.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import threading
from typing import Any

from bot.model.routing import ModelTarget, Route

_future: concurrent.futures.Future[Any] | None = None
_lock = threading.Lock()


def _import(fut: concurrent.futures.Future[Any]) -> None:
    try:
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        # OpenAI-compatible providers: litellm's own HTTP handler instead of the openai SDK
        # client, which re-validates every request body against its TypedDicts.  Measured
        # with bench/turn_bench.py: 4.7 ms of CPU per call with the SDK, 1.9 ms with the
        # handler (the rule: >= 1 ms per message).  Same wire format; "false" goes back.
        os.environ.setdefault("EXPERIMENTAL_OPENAI_BASE_LLM_HTTP_HANDLER", "true")
        import litellm

        litellm.suppress_debug_info = True
        litellm.telemetry = False
        logging.getLogger("LiteLLM").setLevel(logging.WARNING)
        fut.set_result(litellm)
    except BaseException as e:  # an ImportError is reported to every waiter
        fut.set_exception(e)


def start() -> concurrent.futures.Future[Any]:
    """Begin importing litellm in a daemon thread (once per process); returns at once."""
    global _future  # noqa: PLW0603 - one import per process
    with _lock:
        if _future is None:
            fut: concurrent.futures.Future[Any] = concurrent.futures.Future()
            fut.set_running_or_notify_cancel()  # a waiter that gives up cannot cancel it
            threading.Thread(
                target=_import, args=(fut,), name="litellm-import", daemon=True
            ).start()
            _future = fut
        return _future


def loaded() -> Any:
    """The litellm module if it has been imported here, else None (never imports it)."""
    fut = _future
    if fut is None or not fut.done() or fut.exception() is not None:
        return None
    return fut.result()


def warm_up() -> Any:
    """The litellm module, imported now if needed (blocking: from a thread or a command)."""
    return start().result()


async def litellm() -> Any:
    """The litellm module, imported first if needed (never blocks the event loop)."""
    return await asyncio.wrap_future(start())


def _prices(lit: Any, model: str, provider: str) -> Any:
    """Per-token prices from litellm's local cost map; None when the model is not in it."""
    try:
        info = lit.get_model_info(model=model, custom_llm_provider=provider)
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


def _route(lit: Any, model: str, api_base: str) -> Route:
    try:
        name, provider, _key, _base = lit.get_llm_provider(model=model, api_base=api_base or None)
    except Exception as e:
        text = str(e).strip()
        return Route(error=text.splitlines()[0] if text else type(e).__name__)
    provider, name = str(provider or ""), str(name or model)
    return Route(provider, name, prices=_prices(lit, name, provider))


def routing_error(model: str, api_base: str = "") -> str:
    """Why litellm cannot route this model string ("" when it can).  Imports litellm."""
    return _route(warm_up(), model, api_base).error


class LiteLLMPath:
    """The registry's last row: litellm serves every model string it can route."""

    name = "litellm"
    label = "litellm"

    def serves(self, model: str, api_base: str) -> bool:
        return True

    async def ready(self) -> None:
        await litellm()

    def route(self, target: ModelTarget) -> Route:
        return _route(warm_up(), target.model, target.api_base)

    def missing_key(self, target: ModelTarget) -> bool:
        """The provider needs a ``*_API_KEY`` variable that is neither configured nor set
        (other credentials, cloud projects or local bases, are left to the provider)."""
        if target.api_key or target.api_base:
            return False
        try:
            found = warm_up().validate_environment(model=target.model)
        except Exception:
            return False
        return any(str(k).endswith("_API_KEY") for k in found.get("missing_keys") or [])

    def takes_effort(self, target: ModelTarget) -> bool:
        provider, _, name = target.model.partition("/")
        try:
            params = warm_up().get_supported_openai_params(model=name, custom_llm_provider=provider)
        except Exception:
            return True
        return params is None or "reasoning_effort" in params

    async def send(self, kw: dict[str, Any], route: Route, timeout: float) -> Any:
        return await warm_up().acompletion(**kw)

    async def embed(self, kw: dict[str, Any], route: Route, timeout: float) -> Any:
        answer = await warm_up().aembedding(
            model=kw["model"],
            input=list(kw["input"]),
            api_base=kw.get("api_base") or None,
            api_key=kw.get("api_key") or None,
            timeout=timeout,
        )
        return answer.model_dump() if hasattr(answer, "model_dump") else answer


LITELLM = LiteLLMPath()
