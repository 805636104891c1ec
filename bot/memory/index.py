"""One agent's memory index: its memory files (``MEMORY.md``, ``memory/**/*.md``) in
chunks, in the state database (bot/store/memory_index.py), searched by words and meaning.

- :meth:`MemoryIndex.sync_files` (a worker thread) stats the files and re-chunks only those
  whose size or mtime changed; a file that is gone leaves the index.  Cheap when nothing
  changed, so every search runs it first: what a search returns is never older than the
  files.
- :meth:`MemoryIndex.embed_missing` embeds each chunk text that has no vector for the
  configured model yet, in batches through the gate (an unchanged text is never embedded
  again: vectors are keyed by the text's SHA-256 and the model).  When every text has one,
  vectors of texts that are gone and of an older model are dropped.
- :meth:`MemoryIndex.start` runs both in the background, every ``poll`` seconds, so new and
  changed files are indexed within seconds; a turn never waits for it.
- :meth:`MemoryIndex.search`: BM25 and cosine, fused and diversified (bot/memory/search.py).
  The query's own embedding is the only model call a search makes; when it cannot be made
  (the endpoint down, the budget spent) the search is by words only and says so.  Without an
  embedder (no ``[memory] embedding_model``) the index ranks by words alone and calls no
  model.  A hit that matched words points at the block of its chunk that holds most of them
  (a note, a list item, a paragraph), not at the whole chunk.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from bot.fs import FileTooLarge, read_under
from bot.memory.chunks import blocks, chunk_lines
from bot.memory.embed import Embedder, Unavailable
from bot.memory.files import MAX_FILE_BYTES, memory_files, relative
from bot.memory.search import Vectors, fts_query, mmr, rrf, to_blob, top, unit, word_overlap
from bot.model import BudgetRefused
from bot.store.memory_index import MARK, ChunkRow, IndexStatus, MemoryTables

log = logging.getLogger("chela.memory")

T = TypeVar("T")
POLL = 2.0  # seconds between two looks at the memory files
CANDIDATES = 50  # per ranking, before fusion


@dataclass(frozen=True)
class Hit:
    path: str
    start: int
    end: int
    score: float
    snippet: str


@dataclass(frozen=True)
class Found:
    hits: list[Hit]
    files: int  # memory files searched
    words_only: str = ""  # why meaning was not used ("" = it was)


@dataclass
class _Cache:
    """The agent's chunk rows and vectors as of one generation of its index."""

    generation: int = -1
    chunks: list[ChunkRow] = field(default_factory=list)
    at: dict[int, int] = field(default_factory=dict)  # chunk id -> its place in chunks
    ids_of: dict[str, list[int]] = field(default_factory=dict)  # text SHA-256 -> chunk ids
    vectors: Vectors = field(default_factory=Vectors)


class MemoryIndex:
    def __init__(
        self,
        agent: str,
        workspace: Path,
        db_path: Path | str,
        embedder: Embedder | None,
        *,
        poll: float = POLL,
    ) -> None:
        self.agent = agent
        self.workspace = Path(workspace)
        self.embedder = embedder
        self.poll = poll
        self.tables = MemoryTables(db_path)
        self.lock = threading.Lock()  # one user of the connection at a time
        self._cache = _Cache()
        self._task: asyncio.Task[None] | None = None
        self._refreshing = asyncio.Lock()

    @property
    def model(self) -> str:
        return self.embedder.model if self.embedder is not None else ""

    # -- indexing -----------------------------------------------------------------------
    def sync_files(self) -> int:
        """Re-chunk the files that changed, drop the ones that are gone: the number of
        files whose chunks changed."""
        root = self.workspace.resolve()
        files = memory_files(root)
        with self.lock:
            known = self.tables.files(self.agent)
            seen: set[str] = set()
            changed = 0
            for f in files:
                rel = relative(root, f)
                seen.add(rel)
                try:
                    st = f.stat()
                except OSError:
                    continue
                stat = (st.st_mtime_ns, st.st_size)
                if known.get(rel) == stat:
                    continue
                lines = _read_lines(root, f)
                if lines is None:
                    continue
                rows = [(c.start, c.end, c.sha, c.text) for c in chunk_lines(lines)]
                self.tables.replace_file(self.agent, rel, stat, rows)
                changed += 1
            for rel in set(known) - seen:
                self.tables.remove_file(self.agent, rel)
                changed += 1
            return changed  # nothing changed: nothing written (it runs every few seconds)

    async def embed_missing(self, *, force: bool = False) -> int:
        """Embed the chunk texts without a vector for the model: how many were embedded.
        Raises ``BudgetRefused`` / ``Unavailable`` (nothing is lost: the next call goes on)."""
        if self.embedder is None:
            return 0
        model = self.embedder.model
        if force:
            await self._locked(self.tables.forget_vectors, self.agent, model)
        todo = await self._locked(self.tables.unembedded, self.agent, model)
        done = 0
        for i in range(0, len(todo), self.embedder.batch):
            part = todo[i : i + self.embedder.batch]
            vecs = await self.embedder.vectors([t for _, t in part], trust="owner", session="")
            rows = [(sha, to_blob(v)) for (sha, _), v in zip(part, vecs, strict=True)]
            await self._locked(self.tables.put_vectors, self.agent, model, rows)
            done += len(part)
        status = await self._locked(self.tables.status, self.agent, model)
        if status.vectors == status.texts and (status.other_vectors or done):
            await self._locked(self.tables.prune_vectors, self.agent, model)
        return done

    async def refresh(self, *, force: bool = False) -> int:
        """Read the files, then embed what is missing (one refresh at a time)."""
        async with self._refreshing:
            await asyncio.to_thread(self.sync_files)
            return await self.embed_missing(force=force)

    async def _locked(self, fn: Callable[..., T], *args: Any) -> T:
        def run() -> T:
            with self.lock:
                return fn(*args)

        return await asyncio.to_thread(run)

    def status(self) -> IndexStatus:
        with self.lock:
            return self.tables.status(self.agent, self.model)

    # -- the background watch --------------------------------------------------------------
    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._watch(), name=f"memory-index:{self.agent}")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await asyncio.to_thread(self._close)

    def _close(self) -> None:
        with self.lock:
            self.tables.close()

    async def _watch(self) -> None:
        budget_said = False
        while True:
            try:
                await self.refresh()
                await self._locked(self._fresh_cache)  # a search then reads no vector
                budget_said = False
            except Unavailable:
                pass  # said once by the embedder; tried again after its pause
            except BudgetRefused as e:
                if not budget_said:
                    log.warning("memory: not embedding new notes for now: %s", e.message)
                    budget_said = True
            except Exception:
                log.exception("memory: indexing the memory files of %s failed", self.agent)
            await asyncio.sleep(self.poll)

    # -- search -----------------------------------------------------------------------------
    async def search(
        self, query: str, limit: int, *, session: str = "", trust: str = "owner"
    ) -> Found:
        await asyncio.to_thread(self.sync_files)  # what it finds is never older than the files
        qvec: list[float] | None = None
        why = ""
        if self.embedder is not None:  # none configured: by words alone, nothing to say
            try:
                got = await self.embedder.vectors([query], trust=trust, session=session, timeout=15)
                qvec = unit(got[0])
            except BudgetRefused:
                why = "today's model budget is used up"
            except Unavailable:
                why = "the embedding model is unavailable"
        return await asyncio.to_thread(self._ranked, query, qvec, limit, why)

    def _ranked(self, query: str, qvec: list[float] | None, limit: int, why: str) -> Found:
        with self.lock:
            cache = self._fresh_cache()
            match = fts_query(query)
            words = self.tables.full_text(self.agent, match, CANDIDATES) if match else []
            count = len(self.tables.files(self.agent))
            by_meaning = self._by_meaning(cache, qvec) if qvec is not None else []
            fused = rrf([[i for i, _ in words], by_meaning])
            pool = top(fused, max(limit * 3, 10))
            bodies = self.tables.bodies(self.agent, pool)
            marked = self.tables.highlights(match, [i for i, _ in words if i in bodies])
        rows = {i: cache.chunks[cache.at[i]] for i in pool if i in cache.at}
        sims = cache.vectors.pairwise([r.sha for r in rows.values()])

        def similar(a: int, b: int) -> float:
            pair = (rows[a].sha, rows[b].sha)
            if pair in sims:
                return sims[pair]
            return word_overlap(bodies.get(a, ""), bodies.get(b, ""))

        chosen = mmr({i: fused[i] for i in pool if i in bodies and i in rows}, similar, limit)
        hits = [_hit(rows[i], fused[i], bodies[i], marked.get(i)) for i in chosen]
        if qvec is not None and not cache.vectors and not why:
            why = "no note has been embedded yet"
        return Found(hits, count, why)

    def _by_meaning(self, cache: _Cache, qvec: Sequence[float]) -> list[int]:
        """The chunk ids nearest the query's vector, best first."""
        out: list[int] = []
        for sha, _score in cache.vectors.best(qvec, CANDIDATES):
            out += cache.ids_of.get(sha, [])
        return out[:CANDIDATES]

    def _fresh_cache(self) -> _Cache:
        """The cache, brought to the index's current generation (only new vectors read)."""
        gen = self.tables.generation(self.agent)
        cache = self._cache
        if gen == cache.generation:
            return cache
        chunks = self.tables.chunk_rows(self.agent)
        have = self.tables.vector_shas(self.agent, self.model) if self.model else set()
        wanted = have & {c.sha for c in chunks}
        old = set(cache.vectors.shas)
        new = wanted - old
        added = self.tables.vectors(self.agent, self.model, new)
        cache.vectors.update(added, old - wanted, len(new))
        cache.chunks, cache.generation = chunks, gen
        cache.at = {c.id: n for n, c in enumerate(chunks)}
        cache.ids_of = {}
        for c in chunks:
            cache.ids_of.setdefault(c.sha, []).append(c.id)
        return cache


_MARKED = re.compile(re.escape(MARK[0]) + "(.*?)" + re.escape(MARK[1]), re.DOTALL)
SNIPPET_CHARS = 300


def _hit(row: ChunkRow, score: float, body: str, marked: str | None) -> Hit:
    """The hit of one chunk: with the query's words marked in it, the lines of the block that
    holds the most distinct ones (the first such), else the whole chunk."""
    if not marked:
        return Hit(row.path, row.start, row.end, score, " ".join(body[:SNIPPET_CHARS].split()))
    lines = marked.split("\n")

    def words(block: tuple[int, int]) -> int:
        text = "\n".join(lines[block[0] : block[1] + 1])
        return len({w.lower() for w in _MARKED.findall(text)})

    first, last = max(blocks(lines) or [(0, len(lines) - 1)], key=words)
    text = " ".join("\n".join(lines[first : last + 1]).split())
    cut = max(0, text.find(MARK[0]) - SNIPPET_CHARS // 3) if len(text) > SNIPPET_CHARS else 0
    snippet = ("… " if cut else "") + text[cut : cut + SNIPPET_CHARS]
    snippet = snippet.replace(MARK[0], "[").replace(MARK[1], "]")
    return Hit(row.path, row.start + first, row.start + last, score, snippet)


def _read_lines(root: Path, path: Path) -> list[str] | None:
    """The file's lines (none for a file over ``MAX_FILE_BYTES``); None when it cannot be
    read now (gone, or a link put in its place)."""
    try:
        data = read_under(root, path, MAX_FILE_BYTES)
    except FileTooLarge:
        return []
    except (OSError, ValueError):
        return None
    return data.decode("utf-8", errors="replace").splitlines()
