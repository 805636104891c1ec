"""Closing a prompt cache gives its inotify instance back: 300 caches opened and closed one
after another (more than the kernel's default 128 instances per user) leave a working one.

Integration tier: it spends 300 real inotify instances and builds a prompt for each (seconds);
moved from tests/unit/prompt/test_prompt_cache.py unchanged."""

from __future__ import annotations

from pathlib import Path

from bot.prompt.cache import PromptCache
from bot.prompt.context import PromptContext
from tests.unit.prompt.test_prompt_cache import ws

__all__ = ["ws"]  # the fixture: a workspace with AGENTS.md and SOUL.md, aged an hour


def test_many_caches_do_not_exhaust_inotify(ws: Path) -> None:
    ctx = PromptContext(workspace=ws)
    for _ in range(300):
        c = PromptCache()
        c.get(ctx)
        c.close()
    c = PromptCache()
    assert c.get(ctx) is c.get(ctx)
