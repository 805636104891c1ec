"""Memory search by meaning: numbers, not a test.

For each size (default 10,000 and 100,000 chunks of ~400 tokens, 1536-dimension vectors as
text-embedding-3-small's) it builds an agent's index in a fresh state database and reports:

- search latency (p50 / p95 over the queries) of the ranking itself: full-text + cosine over
  every vector + RRF + MMR (bot/memory/index.py ``_ranked``), the query's vector given (its
  embedding is one request to the endpoint, not measured here); with numpy, and with the plain
  ``array('f')`` loop that serves without it;
- the first search after a change (the vectors read from the database into memory);
- index size per chunk (database bytes: text, FTS5, vector) and the RSS the vectors add;
- the embedding cost of indexing a 50 KB memory file (its chunks, tokens, USD at
  text-embedding-3-small's price from the price table).

    python bench/memory_bench.py [--sizes 10000,100000] [--dims 1536] [--queries 40]
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import statistics
import tempfile
import time
from pathlib import Path

from bot.memory import search
from bot.memory.chunks import chunk_lines, text_sha
from bot.memory.index import MemoryIndex
from bot.memory.search import to_blob, unit

MODEL = "openai/text-embedding-3-small"


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def words(rng: random.Random, n: int) -> list[str]:
    return [
        "w" + "".join(rng.choice("abcdefghijklmnop") for _ in range(rng.randint(3, 8)))
        for _ in range(n)
    ]


def build(db: Path, n: int, dims: int, rng: random.Random, vocab: list[str]) -> MemoryIndex:
    index = MemoryIndex("main", db.parent / "ws", db, None)
    per_file = 1000
    for f in range(0, n, per_file):
        rows, vecs = [], []
        for i in range(f, min(n, f + per_file)):
            body = " ".join(rng.choices(vocab, k=230))  # ~1,600 characters: ~400 tokens
            sha = text_sha(body)
            rows.append((i * 30 + 1, i * 30 + 30, sha, body))
            vecs.append((sha, to_blob([rng.random() - 0.5 for _ in range(dims)])))
        index.tables.replace_file("main", f"memory/{f // per_file}.md", (0, 0), rows)
        index.tables.put_vectors("main", MODEL, vecs)
    index.embedder = _Named()  # type: ignore[assignment]  # the model's name, no endpoint
    return index


class _Named:
    model = MODEL
    batch = 64


CPU: list[float] = []  # CPU ms of the last timed() calls (all threads: BLAS's too)


def timed(index: MemoryIndex, queries: list[tuple[str, list[float]]]) -> list[float]:
    out = []
    CPU.clear()
    for text, vec in queries:
        t0, c0 = time.perf_counter(), time.process_time()
        found = index._ranked(text, vec, 10, "")
        out.append((time.perf_counter() - t0) * 1000)
        CPU.append((time.process_time() - c0) * 1000)
        assert found.hits
    return out


def p95(xs: list[float]) -> float:
    return sorted(xs)[max(0, int(len(xs) * 0.95) - 1)]


def bench_size(n: int, dims: int, queries: int) -> None:
    rng = random.Random(n)
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "chela.sqlite3"
        t0 = time.perf_counter()
        vocab = words(rng, 20000)
        index = build(db, n, dims, rng, vocab)
        built = time.perf_counter() - t0
        index.tables.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        size = db.stat().st_size
        qs = [
            (" ".join(rng.choices(vocab, k=3)), unit([rng.gauss(0, 1) for _ in range(dims)]))
            for _ in range(queries)
        ]
        before = rss_mb()
        t0 = time.perf_counter()
        index._ranked(*qs[0], 10, "")
        cold = (time.perf_counter() - t0) * 1000
        added = rss_mb() - before
        fast = timed(index, qs)
        fast_cpu = list(CPU)
        saved, search._numpy = search._numpy, lambda: None  # the plain loop, as without numpy
        index._cache.generation = -1
        index._cache.vectors = search.Vectors()
        index._ranked(*qs[0], 10, "")
        plain = timed(index, qs[: max(3, queries // 10)])
        search._numpy = saved
        print(
            f"{n:>7} chunks x {dims} dims: built in {built:.0f} s; db {size / n / 1024:.1f} KiB/chunk "
            f"({size / 2**20:.0f} MiB); first search {cold:.0f} ms, RSS +{added:.0f} MiB"
        )
        label = "numpy" if saved is not None else "no numpy"
        print(
            f"          search ({label}) p50 {statistics.median(fast):.1f} ms, p95 {p95(fast):.1f} ms"
            f" (CPU p50 {statistics.median(fast_cpu):.1f} ms)"
        )
        print(
            f"          search (plain loop) p50 {statistics.median(plain):.1f} ms, p95 {p95(plain):.1f} ms"
        )
        index.tables.close()


def cost_of_50kb() -> None:
    from bot.model import prices

    prices.load()
    rng = random.Random(50)
    vocab = words(rng, 3000)
    lines, size = [], 0
    while size < 50 * 1024:
        line = "- " + " ".join(rng.choices(vocab, k=rng.randint(4, 16)))
        lines.append(line)
        size += len(line) + 1
    chunks = chunk_lines(lines)
    tokens = sum(len(c.text) for c in chunks) // 4
    info = prices.model_info("text-embedding-3-small", "openai")
    per_token = info.prices[0] if info and info.prices else 0.0
    print(
        f"50 KB memory: {len(chunks)} chunks, ~{tokens} tokens embedded (overlap included), "
        f"${tokens * per_token:.6f} at {per_token * 1e6:.3f} $/M tokens; an edit re-embeds 1-2 chunks"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--dims", type=int, default=1536)
    ap.add_argument("--queries", type=int, default=40)
    args = ap.parse_args()
    print(
        f"numpy: {'yes' if search._numpy() is not None else 'no'}; RSS at start {rss_mb():.0f} MiB"
    )
    cost_of_50kb()
    for n in (int(x) for x in args.sizes.split(",")):
        bench_size(n, args.dims, args.queries)
    print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
