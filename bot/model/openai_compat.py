"""Chela's own Chat Completions client over aiohttp: the light path for models
behind an OpenAI-compatible endpoint, without litellm.

Which models it serves (:meth:`OpenAICompatPath.serves`; ``bot.model.paths`` asks it
first):

- ``openai/<model>`` and ``custom_openai/<model>``: always this client (``api_base``, else
  ``$OPENAI_BASE_URL`` / ``$OPENAI_API_BASE``, else OpenAI's own endpoint; the key is the
  configured one, else ``$OPENAI_API_KEY``);
- ``hosted_vllm/``, ``lm_studio/``, ``llamafile/`` with an ``api_base``: this client (those
  servers speak the protocol; litellm sends them the same body);
- except OpenAI's reasoning families (``openai/o1…``, ``o3…``, ``o4…``, ``gpt-5…``), whose
  parameters litellm rewrites (``max_tokens`` → ``max_completion_tokens``, temperature
  dropped, system → user for some): litellm, so the request stays the same;
- everything else (``anthropic/``, ``gemini/``, ``ollama/``, ``ollama_chat/``, ``groq/``…):
  litellm.  A hosted OpenAI-compatible service (OpenRouter, Groq, DeepSeek, Together) takes
  the light path when written ``openai/<model>`` with its ``api_base``.

``CHELA_MODEL_PATH=litellm`` sends every model through litellm (``bot.model.paths``: the way
back, and how the tests run one contract over both paths).

The request body is what litellm sends for the same call (the model without its prefix,
the messages, tools and request parameters as given); errors are raised as
:class:`ProviderError` (status, the response's headers, the provider's message) or as the
connection's and timeout's own exceptions, and classified by ``bot.model.errors`` exactly
as litellm's are.
"""

from __future__ import annotations

import asyncio
import json
import os
import weakref
from collections.abc import AsyncIterator
from typing import Any

import aiohttp

from bot.net.fetch import endpoint_pool

from bot.model import prices
from bot.model.routing import ModelTarget, Route

OPENAI_BASE = "https://api.openai.com/v1"
_ALWAYS = frozenset({"openai", "custom_openai"})
_WITH_BASE = frozenset({"hosted_vllm", "lm_studio", "llamafile"})
_REWRITTEN = ("o1", "o3", "o4", "gpt-5")  # openai/ families litellm rewrites requests for
# keyword arguments of the model call that are not part of the request body
_NOT_BODY = frozenset(
    {"model", "timeout", "num_retries", "max_retries", "api_base", "api_key", "drop_params"}
)
_OVERFLOW = (
    "context_length_exceeded",
    "maximum context length",
    "context window",
    "prompt is too long",
    "too many tokens",
)


def _info(model: str) -> prices.ModelInfo | None:
    provider, _, name = model.partition("/")
    return prices.model_info(name, "openai" if provider == "custom_openai" else provider)


def route(model: str) -> Route:
    """The route of a light-path model: its name without the prefix and its prices."""
    provider, _, name = model.partition("/")
    info = _info(model)
    return Route(provider=provider, model=name, prices=info.prices if info else None)


def _env_base() -> str:
    return os.environ.get("OPENAI_BASE_URL") or os.environ.get("OPENAI_API_BASE") or ""


def body_of(kw: dict[str, Any], route_: Route) -> dict[str, Any]:
    """The request body for the call's keyword arguments (what litellm would send)."""
    body = {k: v for k, v in kw.items() if k not in _NOT_BODY and v is not None}
    body["model"] = route_.model
    if "reasoning_effort" in body and kw.get("drop_params"):
        # litellm drops it (drop_params) for a model its table knows without reasoning
        info = prices.model_info(route_.model, route_.provider)
        if info is not None and not info.reasoning:
            del body["reasoning_effort"]
    return body


class ProviderError(Exception):
    """The endpoint answered with an HTTP error: ``status_code``, its ``headers`` (for
    Retry-After), the provider's message; ``context_overflow`` when it says the request does
    not fit the model's window."""

    def __init__(self, status: int, message: str, headers: dict[str, str], code: str = "") -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status_code = status
        self.headers = headers
        self.code = code
        low = f"{code} {message}".lower()
        self.context_overflow = status == 400 and any(s in low for s in _OVERFLOW)


async def _error_of(resp: aiohttp.ClientResponse) -> ProviderError:
    text = (await resp.text(errors="replace"))[:4000]
    message, code = text, ""
    try:
        err = json.loads(text).get("error")
        if isinstance(err, dict):
            message = str(err.get("message") or text)
            code = str(err.get("code") or err.get("type") or "")
        elif isinstance(err, str):
            message = err
    except (ValueError, AttributeError):
        pass
    return ProviderError(
        resp.status, message.strip() or resp.reason or "", dict(resp.headers), code
    )


# ------------------------------------------------------------------ one session per loop
_sessions: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, tuple[aiohttp.ClientSession, Any]]
_sessions = weakref.WeakKeyDictionary()


async def _closer(session: aiohttp.ClientSession) -> AsyncIterator[None]:
    """Parked at its ``yield`` for the loop's life: the loop's ``shutdown_asyncgens``
    (``asyncio.run`` calls it) closes it, and with it the session."""
    try:
        yield
    finally:
        await session.close()


async def session() -> aiohttp.ClientSession:
    """The running loop's session (connections kept alive between calls)."""
    loop = asyncio.get_running_loop()
    held = _sessions.get(loop)
    if held is not None and not held[0].closed:
        return held[0]
    s = endpoint_pool({"User-Agent": "chela"})
    closer = _closer(s)
    await closer.__anext__()
    _sessions[loop] = (s, closer)
    return s


# ------------------------------------------------------------------------------ calls
def _url_and_headers(kw: dict[str, Any]) -> tuple[str, dict[str, str]]:
    base = (kw.get("api_base") or _env_base() or OPENAI_BASE).rstrip("/")
    key = kw.get("api_key") or os.environ.get("OPENAI_API_KEY") or ""
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    return f"{base}/chat/completions", headers


def _limits(timeout: float, streaming: bool) -> aiohttp.ClientTimeout:
    """A call's timeouts: a streamed answer is bounded per read, a whole one in total."""
    if streaming:
        return aiohttp.ClientTimeout(total=None, sock_connect=timeout, sock_read=timeout)
    return aiohttp.ClientTimeout(total=timeout)


async def send(kw: dict[str, Any], route_: Route, timeout: float) -> Any:
    """One request: the parsed JSON answer, or (``stream``) an async iterator of chunks."""
    url, headers = _url_and_headers(kw)
    data = json.dumps(body_of(kw, route_)).encode()
    streaming = bool(kw.get("stream"))
    limits = _limits(timeout, streaming)
    s = await session()
    try:
        resp = await s.post(url, data=data, headers=headers, timeout=limits)
        if resp.status >= 400:
            async with resp:
                raise await _error_of(resp)
        if streaming:
            return _chunks(resp)
        async with resp:
            return json.loads(await resp.read())
    except (TimeoutError, ProviderError):
        raise
    except aiohttp.ClientError as e:  # refused, dropped, broken: a connection error
        raise ConnectionError(f"{type(e).__name__}: {e}") from e
    except ValueError as e:  # not JSON: the endpoint does not speak the protocol
        raise ProviderError(502, f"the answer is not JSON ({e})", {}) from e


async def embed(kw: dict[str, Any], route_: Route, timeout: float) -> Any:
    """One ``POST /embeddings`` request for a batch of texts: the parsed JSON answer."""
    url, headers = _url_and_headers(kw)
    url = url.removesuffix("/chat/completions") + "/embeddings"
    body = {"model": route_.model, "input": list(kw["input"]), "encoding_format": "float"}
    s = await session()
    try:
        resp = await s.post(
            url, data=json.dumps(body).encode(), headers=headers, timeout=_limits(timeout, False)
        )
        async with resp:
            if resp.status >= 400:
                raise await _error_of(resp)
            return json.loads(await resp.read())
    except (TimeoutError, ProviderError):
        raise
    except aiohttp.ClientError as e:
        raise ConnectionError(f"{type(e).__name__}: {e}") from e
    except ValueError as e:
        raise ProviderError(502, f"the answer is not JSON ({e})", {}) from e


async def _chunks(resp: aiohttp.ClientResponse) -> AsyncIterator[dict[str, Any]]:
    """The ``data:`` events of an SSE stream as parsed chunks, until ``[DONE]``."""
    try:
        async for raw in resp.content:
            line = raw.strip()
            if not line.startswith(b"data:"):
                continue
            payload = line[5:].strip()
            if payload == b"[DONE]":
                return
            chunk = json.loads(payload)
            if isinstance(chunk, dict) and chunk.get("error"):
                err = chunk["error"]
                msg = err.get("message", "") if isinstance(err, dict) else str(err)
                raise ProviderError(500, str(msg), dict(resp.headers))
            yield chunk
    except aiohttp.ClientError as e:
        raise ConnectionError(f"{type(e).__name__}: {e}") from e
    finally:
        resp.release()


class OpenAICompatPath:
    """The registry's first row: Chela's own client for the models listed above."""

    name = "openai_compat"
    label = "light (Chela's own client)"

    def serves(self, model: str, api_base: str) -> bool:
        provider, sep, name = model.partition("/")
        if not sep or not name or (provider == "openai" and name.startswith(_REWRITTEN)):
            return False
        return provider in _ALWAYS or (provider in _WITH_BASE and bool(api_base))

    async def ready(self) -> None:
        if not prices.loaded():  # the price table, parsed once (~0.1 s) off the event loop
            await asyncio.to_thread(prices.load)

    def route(self, target: ModelTarget) -> Route:
        return route(target.model)

    def missing_key(self, target: ModelTarget) -> bool:
        """OpenAI's own endpoint without a key (configured or ``$OPENAI_API_KEY``)."""
        return not (
            target.api_key or target.api_base or _env_base() or os.environ.get("OPENAI_API_KEY")
        )

    def takes_effort(self, target: ModelTarget) -> bool:
        info = _info(target.model)
        return info is None or info.reasoning  # unknown to the table: sent

    async def send(self, kw: dict[str, Any], route: Route, timeout: float) -> Any:
        return await send(kw, route, timeout)

    async def embed(self, kw: dict[str, Any], route: Route, timeout: float) -> Any:
        return await embed(kw, route, timeout)


LIGHT = OpenAICompatPath()
