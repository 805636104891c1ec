"""Memory search by meaning (docs/architecture.md, L4): each agent's memory files in chunks
(``chunks``), embedded through the model gate (``embed``), indexed in the state database
beside full-text (``index``), ranked by words and meaning fused (``search``).

:func:`memory_index` builds an agent's index from its config.  Without ``[memory]
embedding_model`` the index has no embedder: it ranks by words alone (BM25) and never calls
a model.  It is the one index ``memory_search`` reads, with a model or without.
"""

from __future__ import annotations

from typing import Any

from bot.memory.embed import Embedder, embedding_target
from bot.memory.index import Found, Hit, MemoryIndex

__all__ = ["Found", "Hit", "MemoryIndex", "memory_index"]


def memory_index(cfg: Any, store: Any, **kw: Any) -> MemoryIndex:
    """The index of the agent ``cfg`` is the view of (``agent_config``), with its embedding
    model behind the gate on ``store``; by words alone without an embedding model."""
    from bot.model import ModelGate

    target = embedding_target(cfg)
    embedder = None if target is None else Embedder(target, ModelGate(cfg, store))
    return MemoryIndex(cfg.agent.id, cfg.agent.workspace, cfg.db_path, embedder, **kw)
