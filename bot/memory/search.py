"""Ranking memory by words and by meaning: vectors as float32 blobs, cosine similarity over
all of an agent's vectors, reciprocal rank fusion of the two rankings, then maximal marginal
relevance so near-duplicates (overlapping chunks, the same note twice) do not fill the list.
Pure: data in, data out.

Cosine similarity is a dot product of unit vectors (they are normalised once, when stored).
With numpy importable the dot products are one matrix-vector product; without it a plain
loop over ``array('f')`` rows (bench/memory_bench.py measures both).
"""

from __future__ import annotations

import heapq
import importlib
import math
import re
from array import array
from collections.abc import Callable, Iterable, Sequence
from operator import mul
from typing import Any


def _numpy() -> Any:
    """numpy when installed (``chela[memory]``): ~50x faster cosine over thousands of vectors
    (bench/memory_bench.py); None and the plain loop below serves.  Imported when the first
    vectors load, not at start: an index without vectors never pays its ~10 MB.
    The import system keeps the module, so a later call costs a dictionary look-up."""
    try:
        return importlib.import_module("numpy")
    except ImportError:  # pragma: no cover - depends on the install
        return None


RRF_K = 60  # the usual constant of reciprocal rank fusion
MMR_LAMBDA = 0.7  # relevance against diversity
_TERM = re.compile(r"\w+", re.UNICODE)


# words that say nothing of a note's subject: left out of the full-text query (unless the
# query has nothing else), so "when is the party for the kid" does not rank every note that
# has "the" or "for" above the one the meaning points to
STOP_WORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "any",
        "are",
        "as",
        "at",
        "be",
        "been",
        "but",
        "by",
        "can",
        "could",
        "did",
        "do",
        "does",
        "for",
        "from",
        "had",
        "has",
        "have",
        "he",
        "her",
        "here",
        "his",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "me",
        "my",
        "not",
        "of",
        "on",
        "or",
        "our",
        "she",
        "so",
        "than",
        "that",
        "the",
        "their",
        "them",
        "then",
        "there",
        "these",
        "they",
        "this",
        "those",
        "to",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "who",
        "whom",
        "why",
        "will",
        "with",
        "would",
        "you",
        "your",
    ]
)


def fts_query(text: str) -> str:
    """An FTS5 expression matching any word of ``text`` but stop words ("" when it has no
    word)."""
    terms = list(dict.fromkeys(t.lower() for t in _TERM.findall(text)))
    terms = [t for t in terms if t not in STOP_WORDS] or terms
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)


def unit(vec: Sequence[float]) -> list[float]:
    norm = math.sqrt(sum(x * x for x in vec))
    return [x / norm for x in vec] if norm else list(vec)


def to_blob(vec: Sequence[float]) -> bytes:
    """A unit vector as float32 bytes (the stored form)."""
    return array("f", unit(vec)).tobytes()


def from_blob(blob: bytes) -> array:
    out = array("f")
    out.frombytes(blob)
    return out


class Vectors:
    """The vectors of one agent and model, by text SHA-256, ready for cosine: one float32
    matrix with numpy, else one ``array('f')`` per vector (never both: memory is the cost)."""

    def __init__(self, rows: Sequence[tuple[str, bytes]] = ()) -> None:
        self.shas: list[str] = []
        self.row: dict[str, int] = {}
        self.dims = 0
        self._rows: list[array] = []
        self._matrix: Any = None
        self.update(rows, set(), len(rows))

    def __len__(self) -> int:
        return len(self.shas)

    def update(
        self, added: Iterable[tuple[str, bytes]], removed: set[str], count: int = -1
    ) -> None:
        """Drop the ``removed`` texts' vectors and add the ``added`` ones (float32 blobs, read
        as they come: with ``count``, at most that many, the matrix is filled in place
        instead of holding every blob first)."""
        keep = [i for i, s in enumerate(self.shas) if s not in removed]
        if not keep:
            self.dims = 0
        shas = [self.shas[i] for i in keep]
        rows = [self._rows[i] for i in keep] if self._rows else []
        # numpy once there may be a vector to hold (``count`` 0: none is added): an index
        # without any (no embedding model) never imports it (~10 MB RSS, bench/run_bench.py)
        np = _numpy() if count or self._matrix is not None else None
        fresh: Any = None
        blobs: list[bytes] = []
        for sha, blob in added:
            if sha in self.row and sha not in removed:
                continue
            self.dims = self.dims or len(blob) // 4
            if len(blob) != self.dims * 4:
                continue
            if np is None:
                rows.append(from_blob(blob))
            elif count >= 0:
                if fresh is None:
                    fresh = np.empty((count, self.dims), dtype=np.float32)
                fresh[len(shas) - len(keep)] = np.frombuffer(blob, dtype=np.float32)
            else:
                blobs.append(blob)
            shas.append(sha)
        if np is not None:
            n = len(shas) - len(keep)
            if fresh is None and n:
                fresh = np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(n, self.dims)
            old = self._matrix[keep] if self._matrix is not None and keep else None
            parts = [m for m in (old, fresh[:n] if n else None) if m is not None]
            self._matrix = parts[0] if len(parts) == 1 else np.vstack(parts) if parts else None
        self.shas, self._rows = shas, rows
        self.row = {s: i for i, s in enumerate(shas)}

    def get(self, sha: str) -> list[float] | None:
        i = self.row.get(sha)
        if i is None:
            return None
        return [float(x) for x in (self._matrix[i] if self._matrix is not None else self._rows[i])]

    def best(self, query: Sequence[float], k: int) -> list[tuple[str, float]]:
        """The ``k`` texts most similar to the unit vector ``query`` (cosine), best first."""
        if not self.shas or len(query) != self.dims:
            return []
        np = _numpy()
        if self._matrix is not None:
            scores = self._matrix @ np.asarray(query, dtype=np.float32)
            idx = np.argpartition(-scores, k)[:k] if len(scores) > k else np.arange(len(scores))
            ranked = sorted((int(i) for i in idx), key=lambda i: -float(scores[i]))
            return [(self.shas[i], float(scores[i])) for i in ranked]
        q = array("f", query)
        plain = [sum(map(mul, q, v)) for v in self._rows]
        return [
            (self.shas[i], plain[i])
            for i in heapq.nlargest(k, range(len(plain)), plain.__getitem__)
        ]

    def pairwise(self, shas: Sequence[str]) -> dict[tuple[str, str], float]:
        """Cosine of every pair of these texts that have a vector."""
        have = [s for s in dict.fromkeys(shas) if s in self.row]
        if self._matrix is not None and have:
            m = self._matrix[[self.row[s] for s in have]]
            sims = (m @ m.T).tolist()
            return {(a, b): sims[i][j] for i, a in enumerate(have) for j, b in enumerate(have)}
        out: dict[tuple[str, str], float] = {}
        for i, a in enumerate(have):
            for b in have[i:]:
                out[(a, b)] = out[(b, a)] = dot(self._rows[self.row[a]], self._rows[self.row[b]])
        return out


def top(scored: dict[int, float], limit: int) -> list[int]:
    """The ``limit`` best ids, ties by id."""
    return sorted(scored, key=lambda i: (-scored[i], i))[:limit]


def rrf(rankings: Sequence[Sequence[int]], k: int = RRF_K) -> dict[int, float]:
    """Reciprocal rank fusion: each id scores the sum of 1 / (k + rank) over the rankings."""
    fused: dict[int, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking, 1):
            fused[item] = fused.get(item, 0.0) + 1.0 / (k + rank)
    return fused


def mmr(
    relevance: dict[int, float],
    similarity: Callable[[int, int], float],
    limit: int,
    lam: float = MMR_LAMBDA,
) -> list[int]:
    """Maximal marginal relevance: repeatedly take the candidate whose relevance (scaled to
    0..1) least overlaps what was taken already."""
    if not relevance:
        return []
    best = max(relevance.values())
    rel = {i: s / best for i, s in relevance.items()} if best > 0 else dict(relevance)
    left = top(rel, len(rel))
    taken: list[int] = []
    while left and len(taken) < limit:

        def gain(i: int) -> float:
            seen = max((similarity(i, j) for j in taken), default=0.0)
            return lam * rel[i] - (1 - lam) * seen

        pick = max(left, key=lambda i: (gain(i), -left.index(i)))
        taken.append(pick)
        left.remove(pick)
    return taken


def word_overlap(a: str, b: str) -> float:
    """Jaccard similarity of two texts' word sets (for chunks without vectors)."""
    wa = {t.lower() for t in _TERM.findall(a)}
    wb = {t.lower() for t in _TERM.findall(b)}
    return len(wa & wb) / len(wa | wb) if wa and wb else 0.0


def dot(a: Sequence[float], b: Sequence[float]) -> float:
    return sum(map(mul, a, b)) if len(a) == len(b) else 0.0
