"""Embeddings for the memory index, always through the model gate: the budget of the trust
level the call runs for is checked first, and each batch's usage and cost is recorded as a
usage row (kind ``embedding``) under the agent.

:class:`Embedder` also keeps the endpoint's health: the first failure of an outage is one
log line, later ones are quiet until it answers again; while it is down the next attempt
waits a growing pause (a search then goes straight to full-text instead of waiting for a
dead endpoint).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from bot.model import LLMError, ModelGate, ModelTarget
from bot.model.embeddings import embed
from channels.retry import Backoff

log = logging.getLogger("chela.memory")

PURPOSE = "embedding"
BATCH = 64  # texts per request
TIMEOUT = 60.0
FIRST_PAUSE, MAX_PAUSE = 5.0, 300.0


class Unavailable(Exception):
    """No embedding now: the endpoint failed (``reason``), or it is resting after a failure."""


def embedding_target(cfg: Any) -> ModelTarget | None:
    """The embedding model of an agent's config (None: full-text search alone).

    ``embedding_api_base`` empty is the agent's ``api_base``.  The key: the variable
    ``embedding_api_key_env`` names; else the agent's own key when the endpoint is the
    agent's (the same base, or no base and the same provider); else the provider's default
    variable (no key given) or, for another base, a placeholder: never the agent's key."""
    m, a = cfg.memory, cfg.agent
    if not m.embedding_model:
        return None
    base = m.embedding_api_base or a.api_base
    placeholder = "sk-local" if base else ""
    if m.embedding_api_key_env:
        key = cfg.secret(m.embedding_api_key_env) or placeholder
    elif base == a.api_base and (base or _provider(m.embedding_model) == _provider(a.model)):
        key = (cfg.secret(a.api_key_env) if a.api_key_env else "") or placeholder
    else:
        key = placeholder
    return ModelTarget(m.embedding_model, base, key, "memory.embedding_model")


def _provider(model: str) -> str:
    return model.split("/", 1)[0] if "/" in model else ""


class Embedder:
    """One agent's embedding model behind its gate."""

    def __init__(
        self,
        target: ModelTarget,
        gate: ModelGate,
        *,
        batch: int = BATCH,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.target = target
        self.gate = gate
        self.batch = batch
        self.clock = clock
        self.down = False
        self._backoff = Backoff(FIRST_PAUSE, MAX_PAUSE)  # the pause after each failure
        self._retry_at = 0.0

    @property
    def model(self) -> str:
        return self.target.model

    def resting(self) -> bool:
        """Down, and its pause after the last failure is not over."""
        return self.down and self.clock() < self._retry_at

    async def vectors(
        self, texts: Sequence[str], *, trust: str, session: str, timeout: float = TIMEOUT
    ) -> list[list[float]]:
        """The vectors of ``texts``.  Raises ``BudgetRefused`` (the budget is spent) or
        :class:`Unavailable` (the endpoint failed or is resting)."""
        if self.resting():
            raise Unavailable("the embedding endpoint is down")
        out: list[list[float]] = []
        for i in range(0, len(texts), self.batch):
            self.gate.check(trust, PURPOSE)
            part = list(texts[i : i + self.batch])
            try:
                got = await embed(self.target, part, timeout)
            except LLMError as e:
                self._failed(e)
                raise Unavailable(str(e)) from None
            self.gate.record(trust, PURPOSE, got.model, got.usage, got.cost, session)
            out += got.vectors
            self._answered()
        return out

    def _failed(self, e: LLMError) -> None:
        self._retry_at = self.clock() + self._backoff.next()
        if not self.down:
            self.down = True
            log.warning(
                "memory: the embedding model %s does not answer (%s); memory search uses "
                "full-text until it does",
                self.target.model,
                e.reason or e,
            )

    def _answered(self) -> None:
        if self.down:
            log.info("memory: the embedding model %s answers again", self.target.model)
        self.down = False
        self._backoff.reset()
