"""memory_search / memory_get over MEMORY.md (or memory.md) and memory/*.md."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

from .base import Tool, ToolContext, ToolError, arg_int, arg_str, display_path, resolve_in_workspace, schema

_TERM = re.compile(r"\w+", re.UNICODE)
MAX_FILE_BYTES = 2 * 1024 * 1024


def memory_files(workspace: Path) -> list[Path]:
    """The memory files of a workspace, in a stable order, all inside the workspace."""
    root = Path(workspace).resolve()
    out: list[Path] = []
    seen: set[Path] = set()

    def add(p: Path) -> None:
        try:
            r = p.resolve()
        except OSError:
            return
        if r in seen or not r.is_file() or not r.is_relative_to(root):
            return
        seen.add(r)
        out.append(r)

    for name in ("MEMORY.md", "memory.md"):
        add(root / name)
    mdir = root / "memory"
    if mdir.is_dir():
        for p in sorted(mdir.rglob("*.md")):
            add(p)
    return out


def _is_memory_path(root: Path, p: Path) -> bool:
    rel = p.relative_to(root)
    if len(rel.parts) == 1:
        return rel.name in ("MEMORY.md", "memory.md")
    return rel.parts[0] == "memory" and p.suffix.lower() == ".md"


def _search(workspace: Path, query: str, max_results: int) -> str:
    root = Path(workspace).resolve()
    files = memory_files(root)
    if not files:
        return "No memory files yet (MEMORY.md or memory/*.md)."
    terms = sorted({t.lower() for t in _TERM.findall(query) if len(t) > 1 or t.isdigit()}) or [query.lower().strip()]
    phrase = query.lower().strip()
    hits: list[tuple[float, int, str]] = []
    order = 0
    for f in files:
        try:
            if f.stat().st_size > MAX_FILE_BYTES:
                continue
            lines = f.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            continue
        rel = display_path(root, f)
        for i, line in enumerate(lines, 1):
            low = line.lower()
            matched = sum(1 for t in terms if t in low)
            if not matched:
                continue
            score = matched / len(terms)
            if len(phrase) > 2 and phrase in low:
                score += 1.0
            order += 1
            text = line.strip()
            if len(text) > 300:
                text = text[:300] + "…"
            hits.append((-score, order, f"{rel}:{i}: {text}"))
    if not hits:
        return f"No matches for {query!r} in {len(files)} memory file{'s' if len(files) != 1 else ''}."
    hits.sort()
    shown = [h[2] for h in hits[:max_results]]
    more = len(hits) - len(shown)
    tail = f"\n[{more} more matching lines not shown]" if more > 0 else ""
    return "\n".join(shown) + tail


async def _memory_search(ctx: ToolContext, args: dict) -> str:
    query = arg_str(args, "query").strip()
    if not query:
        raise ToolError("query is empty")
    max_results = arg_int(args, "max_results", 20, minimum=1) or 20
    return await asyncio.to_thread(_search, ctx.file_root, query, min(max_results, 200))


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
    "Search MEMORY.md and memory/*.md for lines matching a query; returns file:line hits.",
    schema(
        {
            "query": {"type": "string", "description": "Words to look for (case-insensitive)."},
            "max_results": {"type": "integer", "description": "Maximum number of lines to return (default 20).", "minimum": 1},
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
            "path": {"type": "string", "description": "Memory file path, e.g. MEMORY.md or memory/2025-01-31.md."},
            "from": {"type": "integer", "description": "First line to return (1-based).", "minimum": 1},
            "lines": {"type": "integer", "description": "Number of lines to return.", "minimum": 1},
        },
        ["path"],
    ),
    _memory_get,
)
