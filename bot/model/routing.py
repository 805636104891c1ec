"""What a model call is routed by: the model of the chain (:class:`ModelTarget`), what a
path resolved for it (:class:`Route`: the provider's model name, its prices), the cost of
one call from its usage numbers, and :class:`ModelPath`, the small interface every way of
reaching a model implements (``bot.model.paths`` holds the registry of them).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

Prices = tuple[float, float, float, float]  # per token: in, out, cache read, cache write


@dataclass(frozen=True)
class ModelTarget:
    """One model of the chain: ``agent.model`` or an entry of ``agent.fallbacks``."""

    model: str
    api_base: str = ""
    api_key: str = field(default="", repr=False)
    key: str = "agent.model"  # the TOML key that names it (for messages)


@dataclass(frozen=True)
class Route:
    """What a path resolved for one model string."""

    provider: str = ""
    model: str = ""  # the provider's model name (without the prefix)
    error: str = ""  # why the model string cannot be routed ("" = it can)
    prices: Prices | None = None


class ModelPath(Protocol):
    """One way of reaching a model (a row of ``bot.model.paths.PATHS``).

    The client asks, in order: :meth:`serves` (which path takes the model), :meth:`ready`
    (once per call, before anything else: load what the path needs, off the event loop),
    :meth:`route` and :meth:`missing_key` (before any request), then :meth:`send` for each
    attempt; :meth:`embed` for embeddings (``bot.model.embeddings``).  Another kind of call
    is one more method here, implemented by every row.
    """

    name: str  # what CHELA_MODEL_PATH names it by
    label: str  # how ``chela doctor`` names it

    def serves(self, model: str, api_base: str) -> bool: ...

    async def ready(self) -> None: ...

    def route(self, target: ModelTarget) -> Route: ...

    def missing_key(self, target: ModelTarget) -> bool: ...

    def takes_effort(self, target: ModelTarget) -> bool: ...

    async def send(self, kw: dict[str, Any], route: Route, timeout: float) -> Any:
        """One Chat Completions request with the call's keyword arguments (litellm's names):
        the whole answer, or (``stream``) an async iterator of its chunks; failures raise
        what ``bot.model.errors`` classifies."""
        ...

    async def embed(self, kw: dict[str, Any], route: Route, timeout: float) -> Any:
        """One embeddings request (``model``, ``input``: a list of texts, ``api_base``,
        ``api_key``): the answer in OpenAI's shape (``data[i].embedding``, ``usage``)."""
        ...


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
