"""The memory index's tables: each agent's memory files cut in chunks, their full-text index
(FTS5, BM25) and one float32 vector per (agent, embedding model, chunk text SHA-256).

:class:`MemoryTables` opens a connection of its own to the state database: the index is
written by a worker thread (never the event loop's connection, whose transactions it would
join) and by ``chela memory`` beside a running daemon.  Every write is a short transaction
(one file, or one batch of vectors), and bumps the agent's ``generation`` so a reader knows
its in-memory copy of the vectors is stale.  Every query names the agent: no agent ever
reads another's chunks or vectors.
"""

from __future__ import annotations

import contextlib
import sqlite3
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

MEMORY_SCHEMA = """
CREATE TABLE IF NOT EXISTS memory_files (
    agent    TEXT NOT NULL,
    path     TEXT NOT NULL,                     -- relative to the agent's workspace
    mtime_ns INTEGER NOT NULL,
    size     INTEGER NOT NULL,
    PRIMARY KEY (agent, path)
);
CREATE TABLE IF NOT EXISTS memory_chunks (
    id     INTEGER PRIMARY KEY AUTOINCREMENT,
    agent  TEXT NOT NULL,
    path   TEXT NOT NULL,
    start  INTEGER NOT NULL,                    -- first line, 1-based
    end    INTEGER NOT NULL,                    -- last line, inclusive
    sha    TEXT NOT NULL,                       -- SHA-256 of body: the vector's key
    body   TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS memory_chunks_agent ON memory_chunks(agent, path);
CREATE INDEX IF NOT EXISTS memory_chunks_sha ON memory_chunks(agent, sha);
CREATE VIRTUAL TABLE IF NOT EXISTS memory_fts USING fts5(
    body, content='memory_chunks', content_rowid='id',
    tokenize='porter unicode61 remove_diacritics 2'
);
CREATE TABLE IF NOT EXISTS memory_vectors (
    agent TEXT NOT NULL,
    model TEXT NOT NULL,
    sha   TEXT NOT NULL,
    vec   BLOB NOT NULL,                        -- float32, unit length
    PRIMARY KEY (agent, model, sha)
);
CREATE TABLE IF NOT EXISTS memory_state (
    agent      TEXT PRIMARY KEY,
    generation INTEGER NOT NULL DEFAULT 0,      -- bumped by every change of the agent's index
    indexed    REAL NOT NULL DEFAULT 0          -- when a change of its files was last indexed
);
"""

# around a matched word in highlights(): control characters, not the text of a note
MARK = ("\x02", "\x03")

_BUMP = (
    "INSERT INTO memory_state(agent, generation, indexed) VALUES (?, 1, ?)"
    " ON CONFLICT(agent) DO UPDATE SET generation = generation + 1, indexed = excluded.indexed"
)


@dataclass(frozen=True)
class ChunkRow:
    id: int
    path: str
    start: int
    end: int
    sha: str


@dataclass(frozen=True)
class IndexStatus:
    chunks: int
    texts: int  # distinct chunk texts (what needs a vector)
    vectors: int  # of those, embedded with the model asked about
    other_vectors: int  # vectors of other models (dropped once the new model is done)
    indexed: float  # when a change of the files was last indexed (0: never)


class MemoryTables:
    """The memory index tables of one state database, on a connection of their own."""

    def __init__(self, path: Path | str) -> None:
        self.db = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA busy_timeout=5000")
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.executescript(MEMORY_SCHEMA)

    def close(self) -> None:
        self.db.close()

    @contextlib.contextmanager
    def _tx(self, agent: str) -> Iterator[sqlite3.Connection]:
        db = self.db
        db.execute("BEGIN IMMEDIATE")
        try:
            yield db
            db.execute(_BUMP, (agent, time.time()))
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise

    # -- files and chunks ---------------------------------------------------------------
    def files(self, agent: str) -> dict[str, tuple[int, int]]:
        rows = self.db.execute(
            "SELECT path, mtime_ns, size FROM memory_files WHERE agent=?", (agent,)
        )
        return {r[0]: (int(r[1]), int(r[2])) for r in rows}

    def _drop_chunks(self, db: sqlite3.Connection, agent: str, path: str) -> None:
        old = db.execute(
            "SELECT id, body FROM memory_chunks WHERE agent=? AND path=?", (agent, path)
        ).fetchall()
        db.executemany(
            "INSERT INTO memory_fts(memory_fts, rowid, body) VALUES ('delete', ?, ?)", old
        )
        db.execute("DELETE FROM memory_chunks WHERE agent=? AND path=?", (agent, path))

    def replace_file(
        self,
        agent: str,
        path: str,
        stat: tuple[int, int],
        chunks: Iterable[tuple[int, int, str, str]],
    ) -> None:
        """One file's chunks ``(start, end, sha, body)`` replace what it had, in one
        transaction."""
        with self._tx(agent) as db:
            self._drop_chunks(db, agent, path)
            for start, end, sha, body in chunks:
                cur = db.execute(
                    "INSERT INTO memory_chunks(agent, path, start, end, sha, body)"
                    " VALUES (?,?,?,?,?,?)",
                    (agent, path, start, end, sha, body),
                )
                db.execute(
                    "INSERT INTO memory_fts(rowid, body) VALUES (?, ?)", (cur.lastrowid, body)
                )
            db.execute(
                "INSERT OR REPLACE INTO memory_files(agent, path, mtime_ns, size) VALUES (?,?,?,?)",
                (agent, path, stat[0], stat[1]),
            )

    def remove_file(self, agent: str, path: str) -> None:
        with self._tx(agent) as db:
            self._drop_chunks(db, agent, path)
            db.execute("DELETE FROM memory_files WHERE agent=? AND path=?", (agent, path))

    def chunk_rows(self, agent: str) -> list[ChunkRow]:
        rows = self.db.execute(
            "SELECT id, path, start, end, sha FROM memory_chunks WHERE agent=? ORDER BY id",
            (agent,),
        )
        return [ChunkRow(int(r[0]), r[1], int(r[2]), int(r[3]), r[4]) for r in rows]

    def bodies(self, agent: str, ids: Iterable[int]) -> dict[int, str]:
        wanted = list(ids)
        if not wanted:
            return {}
        marks = ",".join("?" * len(wanted))
        # by id alone (an agent=? term makes SQLite walk the agent's index); the agent checked
        rows = self.db.execute(
            f"SELECT id, body, agent FROM memory_chunks WHERE id IN ({marks})", wanted
        )
        return {int(r[0]): r[1] for r in rows if r[2] == agent}

    def full_text(self, agent: str, match: str, limit: int) -> list[tuple[int, float]]:
        """``(chunk id, BM25 rank (lower is better))`` of the agent's chunks that match the
        FTS5 expression ``match``, best first."""
        rows = self.db.execute(
            "SELECT c.id, bm25(memory_fts) FROM memory_fts"
            " JOIN memory_chunks c ON c.id = memory_fts.rowid"
            " WHERE memory_fts MATCH ? AND c.agent = ?"
            " ORDER BY bm25(memory_fts), c.path, c.start LIMIT ?",
            (match, agent, limit),
        )
        return [(int(r[0]), float(r[1])) for r in rows]

    def highlights(self, match: str, ids: Iterable[int]) -> dict[int, str]:
        """The text of these chunks with each word that matched between ``MARK`` (by chunk
        id; chunks that do not match are left out)."""
        wanted = list(ids)
        if not wanted or not match:
            return {}
        marks = ",".join("?" * len(wanted))
        rows = self.db.execute(
            "SELECT rowid, highlight(memory_fts, 0, ?, ?) FROM memory_fts"
            f" WHERE memory_fts MATCH ? AND rowid IN ({marks})",
            (*MARK, match, *wanted),
        )
        return {int(r[0]): r[1] for r in rows}

    # -- vectors --------------------------------------------------------------------------
    def unembedded(self, agent: str, model: str) -> list[tuple[str, str]]:
        """``(sha, text)`` of each distinct chunk text that has no vector for ``model``."""
        rows = self.db.execute(
            "SELECT c.sha, MIN(c.body) FROM memory_chunks c WHERE c.agent=? AND NOT EXISTS"
            " (SELECT 1 FROM memory_vectors v WHERE v.agent=c.agent AND v.model=? AND v.sha=c.sha)"
            " GROUP BY c.sha ORDER BY MIN(c.id)",
            (agent, model),
        )
        return [(r[0], r[1]) for r in rows]

    def put_vectors(self, agent: str, model: str, rows: Iterable[tuple[str, bytes]]) -> None:
        with self._tx(agent) as db:
            db.executemany(
                "INSERT OR REPLACE INTO memory_vectors(agent, model, sha, vec) VALUES (?,?,?,?)",
                [(agent, model, sha, vec) for sha, vec in rows],
            )

    def vectors(self, agent: str, model: str, shas: Iterable[str]) -> Iterator[tuple[str, bytes]]:
        """``(sha, float32 blob)`` of these texts, read 500 at a time as they are consumed."""
        wanted = list(shas)
        for i in range(0, len(wanted), 500):
            part = wanted[i : i + 500]
            marks = ",".join("?" * len(part))
            yield from self.db.execute(
                f"SELECT sha, vec FROM memory_vectors WHERE agent=? AND model=? AND sha IN ({marks})",
                (agent, model, *part),
            )

    def vector_shas(self, agent: str, model: str) -> set[str]:
        rows = self.db.execute(
            "SELECT sha FROM memory_vectors WHERE agent=? AND model=?", (agent, model)
        )
        return {r[0] for r in rows}

    def prune_vectors(self, agent: str, model: str) -> int:
        """Drop the agent's vectors of other models, and of texts no chunk has any more."""
        with self._tx(agent) as db:
            cur = db.execute(
                "DELETE FROM memory_vectors WHERE agent=? AND (model<>? OR sha NOT IN"
                " (SELECT sha FROM memory_chunks WHERE agent=?))",
                (agent, model, agent),
            )
            return int(cur.rowcount)

    def forget_vectors(self, agent: str, model: str) -> None:
        """Drop the agent's vectors of ``model`` (``chela memory reindex --force``)."""
        with self._tx(agent) as db:
            db.execute("DELETE FROM memory_vectors WHERE agent=? AND model=?", (agent, model))

    # -- state ------------------------------------------------------------------------------
    def generation(self, agent: str) -> int:
        row = self.db.execute(
            "SELECT generation FROM memory_state WHERE agent=?", (agent,)
        ).fetchone()
        return int(row[0]) if row else 0

    def status(self, agent: str, model: str) -> IndexStatus:
        db = self.db
        chunks, texts = db.execute(
            "SELECT COUNT(*), COUNT(DISTINCT sha) FROM memory_chunks WHERE agent=?", (agent,)
        ).fetchone()
        mine = db.execute(
            "SELECT COUNT(*) FROM memory_vectors v WHERE agent=? AND model=? AND EXISTS"
            " (SELECT 1 FROM memory_chunks c WHERE c.agent=v.agent AND c.sha=v.sha)",
            (agent, model),
        ).fetchone()[0]
        other = db.execute(
            "SELECT COUNT(*) FROM memory_vectors WHERE agent=? AND model<>?", (agent, model)
        ).fetchone()[0]
        row = db.execute("SELECT indexed FROM memory_state WHERE agent=?", (agent,)).fetchone()
        return IndexStatus(
            int(chunks), int(texts), int(mine), int(other), float(row[0]) if row else 0.0
        )
