"""One embeddings call through the path that serves the model (``bot.model.paths``): the
light path's ``POST /embeddings`` or litellm's ``aembedding``.  The answer's vectors in the
order of the texts, its usage and cost; failures raise :class:`~bot.model.errors.LLMError`
classified as a chat call's are (``kind == "down"``: the endpoint did not answer).

This is the model layer only: the budget and the usage row are the gate's
(``bot.model.gate``), which every caller passes first (bot/memory/embed.py).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from bot.model.errors import LLMError, _classify, no_key_error, unroutable_error
from bot.model.paths import path_for
from bot.model.routing import ModelTarget, cost_of


@dataclass(frozen=True)
class Embeddings:
    vectors: list[list[float]]
    model: str
    usage: dict[str, int] = field(default_factory=dict)
    cost: float = 0.0


def _get(obj: Any, key: str) -> Any:
    return obj.get(key) if isinstance(obj, dict) else getattr(obj, key, None)


def vectors_of(answer: Any, count: int) -> list[list[float]]:
    """The ``count`` vectors of an OpenAI-shaped answer, ordered by their ``index``."""
    data = _get(answer, "data") or []
    out: list[list[float] | None] = [None] * count
    for pos, item in enumerate(data):
        index = _get(item, "index")
        i = index if isinstance(index, int) else pos
        vec = _get(item, "embedding")
        if 0 <= i < count and isinstance(vec, list) and vec:
            out[i] = [float(x) for x in vec]
    if any(v is None for v in out):
        raise ValueError(f"the answer has {len(data)} vectors for {count} texts")
    return [v for v in out if v is not None]


def usage_of(answer: Any) -> dict[str, int]:
    u = _get(answer, "usage")
    tokens = _get(u, "prompt_tokens") if u is not None else None
    if not isinstance(tokens, int):
        tokens = _get(u, "total_tokens") if u is not None else None
    return {"prompt_tokens": tokens if isinstance(tokens, int) else 0}


async def embed(target: ModelTarget, texts: list[str], timeout: float = 60.0) -> Embeddings:
    """The vectors of ``texts`` (one request: the caller batches)."""
    path = path_for(target.model, target.api_base)
    await path.ready()
    route = path.route(target)
    if route.error:
        raise unroutable_error(target, route.error)
    if path.missing_key(target):
        raise no_key_error(target)
    kw = {
        "model": target.model,
        "input": texts,
        "api_base": target.api_base or None,
        "api_key": target.api_key or None,
    }
    try:
        answer = await asyncio.wait_for(path.embed(kw, route, timeout), timeout)
        vectors = vectors_of(answer, len(texts))
    except LLMError:
        raise
    except Exception as e:
        raise _classify(e, timeout, target) from e
    usage = usage_of(answer)
    return Embeddings(vectors, target.model, usage, cost_of(route.prices, usage))
