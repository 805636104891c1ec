"""memory_search / memory_get over MEMORY.md (or memory.md) and memory/*.md.

Search is SQLite FTS5 with BM25 ranking; hits carry path, line range and a snippet.  With
``[memory] embedding_model`` set, the turn's context carries the agent's index (bot/memory)
and the search ranks by words and meaning together."""

from __future__ import annotations

import asyncio
import re
import sqlite3
import threading
from pathlib import Path
from typing import Any

from bot.memory.files import MAX_FILE_BYTES, memory_files

from .base import (
    Tool,
    ToolContext,
    ToolError,
    arg_int,
    arg_str,
    display_path,
    resolve_in_workspace,
    schema,
)

_TERM = re.compile(r"\w+", re.UNICODE)


def _is_memory_path(root: Path, p: Path) -> bool:
    rel = p.relative_to(root)
    if len(rel.parts) == 1:
        return rel.name in ("MEMORY.md", "memory.md")
    return rel.parts[0] == "memory" and p.suffix.lower() == ".md"


class MemoryIndex:
    """An SQLite FTS5 index (BM25 ranking) of one workspace's memory files, in memory.

    Files are cut into chunks (a heading or a blank line starts a new one, at most
    ``CHUNK_LINES`` lines) that remember their line range.  Before each search every
    memory file is stat'ed and a file whose mtime or size changed is re-indexed; a file
    that is gone leaves the index."""

    def __init__(self) -> None:
        self.db = sqlite3.connect(":memory:", check_same_thread=False)
        self.db.execute(
            "CREATE TABLE files (path TEXT PRIMARY KEY, mtime_ns INTEGER, size INTEGER)"
        )
        self.db.execute(
            "CREATE VIRTUAL TABLE chunks USING fts5(path UNINDEXED, start UNINDEXED, end UNINDEXED,"
            " body, tokenize = 'porter unicode61 remove_diacritics 2')"
        )
        self.lock = threading.Lock()

    def sync(self, root: Path, files: list[Path]) -> None:
        known = {
            r[0]: (r[1], r[2]) for r in self.db.execute("SELECT path, mtime_ns, size FROM files")
        }
        seen = set()
        for f in files:
            rel = display_path(root, f)
            seen.add(rel)
            try:
                st = f.stat()
            except OSError:
                continue
            if known.get(rel) == (st.st_mtime_ns, st.st_size):
                continue
            if st.st_size > MAX_FILE_BYTES:
                lines: list[str] = []
            else:
                try:
                    lines = f.read_text(encoding="utf-8", errors="replace").splitlines()
                except OSError:
                    continue
            with self.db:
                self.db.execute("DELETE FROM chunks WHERE path=?", (rel,))
                self.db.executemany(
                    "INSERT INTO chunks(path, start, end, body) VALUES (?,?,?,?)",
                    [(rel, a, b, text) for a, b, text in chunk_lines(lines)],
                )
                self.db.execute(
                    "INSERT OR REPLACE INTO files(path, mtime_ns, size) VALUES (?,?,?)",
                    (rel, st.st_mtime_ns, st.st_size),
                )
        for rel in set(known) - seen:
            with self.db:
                self.db.execute("DELETE FROM chunks WHERE path=?", (rel,))
                self.db.execute("DELETE FROM files WHERE path=?", (rel,))

    def search(self, query: str, limit: int) -> list[tuple[str, int, int, float, str]]:
        """(path, first line, last line, score, snippet), best first."""
        terms = list(dict.fromkeys(t.lower() for t in _TERM.findall(query)))
        if not terms:
            return []
        match = " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)
        rows = self.db.execute(
            "SELECT path, start, end, bm25(chunks), snippet(chunks, 3, '[', ']', ' … ', 24) FROM chunks"
            " WHERE chunks MATCH ? ORDER BY bm25(chunks), path, start LIMIT ?",
            (match, limit),
        ).fetchall()
        return [(r[0], int(r[1]), int(r[2]), -float(r[3]), " ".join(r[4].split())) for r in rows]


CHUNK_LINES = 12
# a heading or a list item starts its own chunk (memory notes are mostly bullets)
_BLOCK_START = re.compile(r"\s{0,3}(#{1,6}\s|[-*+]\s|\d{1,3}[.)]\s)")


def chunk_lines(lines: list[str]) -> list[tuple[int, int, str]]:
    """Cut a file into (first line, last line, text) chunks, 1-based and inclusive: a
    blank line ends a chunk, a heading or a list item starts one."""
    out: list[tuple[int, int, str]] = []
    cur: list[str] = []
    first = 0

    def close() -> None:
        if cur and any(x.strip() for x in cur):
            out.append((first, first + len(cur) - 1, "\n".join(cur)))

    for i, line in enumerate(lines, 1):
        if not line.strip():
            close()
            cur, first = [], 0
            continue
        if cur and (_BLOCK_START.match(line) or len(cur) >= CHUNK_LINES):
            close()
            cur, first = [], 0
        if not cur:
            first = i
        cur.append(line)
    close()
    return out


_indexes: dict[str, MemoryIndex] = {}
_indexes_lock = threading.Lock()


def index_for(workspace: Path) -> MemoryIndex:
    key = str(Path(workspace).resolve())
    with _indexes_lock:
        idx = _indexes.get(key)
        if idx is None:
            idx = _indexes[key] = MemoryIndex()
        return idx


def _search(workspace: Path, query: str, max_results: int) -> str:
    root = Path(workspace).resolve()
    files = memory_files(root)
    if not files:
        return "No memory files yet (MEMORY.md or memory/*.md)."
    idx = index_for(root)
    with idx.lock:
        idx.sync(root, files)
        hits = idx.search(query, max_results)
    if not hits:
        return (
            f"No matches for {query!r} in {len(files)} memory file{'s' if len(files) != 1 else ''}."
        )
    out = []
    for path, a, b, score, snip in hits:
        where = f"{path}:{a}" if a == b else f"{path}:{a}-{b}"
        out.append(f"{where} (score {score:.3g}): {snip[:400]}")
    return "\n".join(out)


async def _memory_search(ctx: ToolContext, args: dict) -> str:
    query = arg_str(args, "query").strip()
    if not query:
        raise ToolError("query is empty")
    max_results = arg_int(args, "max_results", 10, minimum=1) or 10
    if ctx.memory is not None:  # by words and meaning (bot/memory)
        found = await ctx.memory.search(
            query, min(max_results, 100), session=ctx.session_key, trust=ctx.trust
        )
        return _found_text(query, found)
    return await asyncio.to_thread(_search, ctx.file_root, query, min(max_results, 100))


def _found_text(query: str, found: Any) -> str:
    note = f"\n(searched by words only: {found.words_only})" if found.words_only else ""
    if not found.files:
        return "No memory files yet (MEMORY.md or memory/*.md)."
    if not found.hits:
        s = "s" if found.files != 1 else ""
        return f"No matches for {query!r} in {found.files} memory file{s}.{note}"
    out = []
    for h in found.hits:
        where = f"{h.path}:{h.start}" if h.start == h.end else f"{h.path}:{h.start}-{h.end}"
        out.append(f"{where} (score {h.score:.3g}): {h.snippet[:400]}")
    return "\n".join(out) + note


def _get(workspace: Path, path: str, start: int, count: int | None) -> str:
    root = Path(workspace).resolve()
    p = resolve_in_workspace(root, path)
    if not _is_memory_path(root, p):
        raise ToolError(f"{path} is not a memory file (use MEMORY.md or memory/<name>.md)")
    if not p.is_file():
        raise ToolError(f"memory file not found: {path}")
    lines = p.read_text(encoding="utf-8", errors="replace").splitlines()
    total = len(lines)
    if total == 0:
        return "(empty file)"
    if start > total:
        return f"(the file has only {total} lines)"
    end = total if count is None else min(total, start - 1 + count)
    body = "\n".join(lines[start - 1 : end])
    if start > 1 or end < total:
        body += f"\n[lines {start}-{end} of {total}]"
    return body


async def _memory_get(ctx: ToolContext, args: dict) -> str:
    path = arg_str(args, "path")
    start = arg_int(args, "from", 1, minimum=1) or 1
    count = arg_int(args, "lines", None, minimum=1)
    try:
        return await asyncio.to_thread(_get, ctx.file_root, path, start, count)
    except OSError as e:
        raise ToolError(f"cannot read {path}: {e.strerror or e}") from None


MEMORY_SEARCH = Tool(
    "memory_search",
    "Search MEMORY.md and memory/*.md (ranked full-text search); returns path:lines, score and a snippet per hit.",
    schema(
        {
            "query": {"type": "string", "description": "Words to look for (case-insensitive)."},
            "max_results": {
                "type": "integer",
                "description": "Maximum number of hits to return (default 10).",
                "minimum": 1,
            },
        },
        ["query"],
    ),
    _memory_search,
)

MEMORY_GET = Tool(
    "memory_get",
    "Read a memory file (MEMORY.md or memory/<name>.md), optionally only some lines.",
    schema(
        {
            "path": {
                "type": "string",
                "description": "Memory file path, e.g. MEMORY.md or memory/2025-01-31.md.",
            },
            "from": {
                "type": "integer",
                "description": "First line to return (1-based).",
                "minimum": 1,
            },
            "lines": {"type": "integer", "description": "Number of lines to return.", "minimum": 1},
        },
        ["path"],
    ),
    _memory_get,
)
