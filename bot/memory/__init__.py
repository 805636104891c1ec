"""Memory search by meaning (docs/architecture.md, L4): each agent's memory files in chunks
(``chunks``), embedded through the model gate (``embed``), indexed in the state database
beside full-text (``index``), ranked by words and meaning fused (``search``).

:func:`memory_index` builds an agent's index from its config: None when the agent has no
``[memory] embedding_model`` (its ``memory_search`` is full-text alone, as before).
"""

from __future__ import annotations

from typing import Any

from bot.memory.embed import Embedder, embedding_target
from bot.memory.index import Found, Hit, MemoryIndex

__all__ = ["Found", "Hit", "MemoryIndex", "memory_index"]


def memory_index(cfg: Any, store: Any, **kw: Any) -> MemoryIndex | None:
    """The index of the agent ``cfg`` is the view of (``agent_config``), with its embedding
    model behind the gate on ``store``; None without an embedding model."""
    from bot.model import ModelGate

    target = embedding_target(cfg)
    if target is None:
        return None
    embedder = Embedder(target, ModelGate(cfg, store))
    return MemoryIndex(cfg.agent.id, cfg.agent.workspace, cfg.db_path, embedder, **kw)
