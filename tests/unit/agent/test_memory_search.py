"""memory_search: ranking over MEMORY.md and memory/*.md by words (the agent's memory index,
bot/memory, without an embedding model), re-indexing changed and removed files, and the line
ranges of its hits. Moved from tests/e2e/test_compaction.py (no daemon needed)."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest

from bot.agent.tools.memory import _found_text
from bot.memory import MemoryIndex
from bot.memory.chunks import blocks


FILES = {
    "MEMORY.md": "# People\n- Alice likes green tea\n- Bob prefers coffee, never tea\n\n# Work\n"
    "- The deploy key lives in /srv/keys/deploy.pem\n- Quarterly report due 2025-03-31\n",
    "memory/2025-01-02.md": "Met Alice at the tea house on Friday.\nShe is moving to Lisbon in May.\n\n"
    "Unrelated: bought printer paper.\n",
    "memory/2025-01-05.md": "# Errands\n- renew passport (number X1234567)\n- call the dentist about the crown\n",
}
RANKING = [
    ("Alice tea", "MEMORY.md:2"),
    ("Lisbon", "memory/2025-01-02.md:1-2"),
    ("moving to Lisbon", "memory/2025-01-02.md:1-2"),
    ("passport number", "memory/2025-01-05.md:2"),
    ("X1234567", "memory/2025-01-05.md:2"),
    ("deploy key", "MEMORY.md:6"),
    ("report due", "MEMORY.md:7"),
    ("coffee", "MEMORY.md:3"),
    ("dentists", "memory/2025-01-05.md:3"),  # stemming
    ("printer", "memory/2025-01-02.md:4"),
]


def _search(ws: Path, query: str, limit: int) -> str:
    """What memory_search answers, from the agent's index in a state database beside ``ws``."""

    async def run() -> str:
        index = MemoryIndex("main", ws, ws.parent / "state.db", None)
        try:
            return _found_text(query, await index.search(query, limit))
        finally:
            await index.stop()

    return asyncio.run(run())


@pytest.fixture
def mem_ws(tmp_path):
    tmp_path = tmp_path / "ws"
    for rel, body in FILES.items():
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(body)
    (tmp_path / "notes.md").write_text("Alice tea Lisbon passport everything")  # not a memory file
    return tmp_path


@pytest.mark.parametrize("query,top", RANKING)
def test_memory_search_ranking(mem_ws, query, top):
    out = _search(mem_ws, query, 5).splitlines()
    assert out[0].startswith(top + " (score "), out
    assert not any(line.startswith("notes.md") for line in out)


def test_memory_search_reindexes_changed_and_removed_files(mem_ws):
    assert "No matches" in _search(mem_ws, "zeppelin", 5)
    p = mem_ws / "memory" / "2025-01-02.md"
    p.write_text(p.read_text() + "\nRode a zeppelin over the bay.\n")
    os.utime(p, (time.time() + 5, time.time() + 5))
    assert _search(mem_ws, "zeppelin", 5).startswith("memory/2025-01-02.md:6 (score")
    p.unlink()
    assert "No matches" in _search(mem_ws, "zeppelin", 5)
    (mem_ws / "memory.md").unlink(missing_ok=True)
    assert _search(mem_ws, "Alice", 5).startswith("MEMORY.md:2")


def test_hits_point_at_blocks_with_their_line_ranges():
    lines = ["# Head", "- one", "  continued", "- two", "", "para a", "para b"]
    assert blocks(lines) == [(0, 0), (1, 2), (3, 3), (5, 6)]  # 0-based, inclusive
