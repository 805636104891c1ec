"""The pure parts of ranking: the full-text query, cosine over float32 blobs (numpy or the
plain loop, the same numbers), reciprocal rank fusion and MMR."""

from __future__ import annotations

import random

import pytest

from bot.memory import search
from bot.memory.search import Vectors, fts_query, mmr, rrf, to_blob, unit


def test_fts_query_leaves_out_stop_words():
    assert fts_query("When is the celebration for the kid?") == '"celebration" OR "kid"'
    # twin: a query of stop words only keeps them (it still finds something)
    assert fts_query("what is it") == '"what" OR "is" OR "it"'
    assert fts_query("?!") == ""
    assert fts_query('say "hi"') == '"say" OR "hi"'


def test_rrf_adds_reciprocal_ranks():
    fused = rrf([[1, 2, 3], [3, 1]], k=60)
    assert fused[1] == pytest.approx(1 / 61 + 1 / 62)
    assert fused[3] == pytest.approx(1 / 63 + 1 / 61)
    assert fused[2] == pytest.approx(1 / 62)
    assert rrf([[], []]) == {}


def test_mmr_skips_a_near_duplicate():
    relevance = {1: 1.0, 2: 0.99, 3: 0.6}
    same = {frozenset({1, 2}): 0.98}

    def sim(a: int, b: int) -> float:
        return same.get(frozenset({a, b}), 0.0)

    assert mmr(relevance, sim, 2) == [1, 3]
    # twin: without the duplicate, relevance decides
    assert mmr(relevance, lambda a, b: 0.0, 2) == [1, 2]


def test_cosine_over_blobs(monkeypatch):
    rng = random.Random(3)
    rows = [(f"s{i}", to_blob([rng.uniform(-1, 1) for _ in range(64)])) for i in range(50)]
    q = unit([rng.uniform(-1, 1) for _ in range(64)])
    shas = ["s1", "s2", "s3"]
    fast = Vectors(rows)
    best_fast, pairs_fast = fast.best(q, 5), fast.pairwise(shas)
    monkeypatch.setattr(search, "_numpy", lambda: None)  # the plain loop, as without numpy
    plain = Vectors(rows)
    best_plain = plain.best(q, 5)
    assert [s for s, _ in best_fast] == [s for s, _ in best_plain]
    assert [x for _, x in best_fast] == pytest.approx([x for _, x in best_plain], abs=1e-5)
    assert best_plain[0][1] >= best_plain[-1][1]
    own = plain.get("s7")
    assert plain.best(own, 1) == [("s7", pytest.approx(1, abs=1e-5))]
    assert plain.pairwise(shas) == pytest.approx(pairs_fast, abs=1e-5)
    assert plain.pairwise(shas)[("s2", "s2")] == pytest.approx(1, abs=1e-5)


@pytest.mark.parametrize("numpy", [True, False])
def test_vectors_update_adds_and_drops(monkeypatch, numpy):
    if not numpy:
        monkeypatch.setattr(search, "_numpy", lambda: None)
    v = Vectors([("a", to_blob([1, 0])), ("b", to_blob([0, 1]))])
    v.update([("c", to_blob([1, 1]))], {"a"})
    assert v.shas == ["b", "c"] and v.get("a") is None
    assert v.best(unit([1, 1]), 1) == [("c", pytest.approx(1, abs=1e-6))]
    v.update([], {"b", "c"})
    assert len(v) == 0 and v.best(unit([1, 1]), 1) == []
