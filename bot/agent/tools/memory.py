"""memory_search / memory_get over MEMORY.md (or memory.md) and memory/*.md.

memory_search reads the agent's memory index (bot/memory, in the state database), which the
turn's context carries: BM25 over its chunks, and with ``[memory] embedding_model`` set their
meaning too, fused.  Hits carry path, line range and a snippet."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from .base import (
    Tool,
    ToolContext,
    ToolError,
    arg_int,
    arg_str,
    resolve_in_workspace,
    schema,
)


def _is_memory_path(root: Path, p: Path) -> bool:
    rel = p.relative_to(root)
    if len(rel.parts) == 1:
        return rel.name in ("MEMORY.md", "memory.md")
    return rel.parts[0] == "memory" and p.suffix.lower() == ".md"


async def _memory_search(ctx: ToolContext, args: dict) -> str:
    query = arg_str(args, "query").strip()
    if not query:
        raise ToolError("query is empty")
    max_results = arg_int(args, "max_results", 10, minimum=1) or 10
    if ctx.memory is None:  # a turn without the agent's index (not an owner's)
        raise ToolError("memory search is not available in this conversation")
    found = await ctx.memory.search(
        query, min(max_results, 100), session=ctx.session_key, trust=ctx.trust
    )
    return _found_text(query, found)


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
