"""``GET /ui/api/system``: version, process, uptime, memory, where things are."""

from __future__ import annotations

import os
import time

from pathlib import Path

from aiohttp import web

from bot import fs

from bot import __version__
from bot.store import pending
from bot.ui.api.common import guarded, state


def rss_bytes() -> int:
    """The process's resident memory now (Linux ``/proc``; 0 elsewhere)."""
    try:
        statm = fs.read_in(Path("/proc/self/statm"), 4096).split()
        return int(statm[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


async def system(request: web.Request) -> web.Response:
    ctx = state(request).ctx
    started = ctx.started or time.time()
    path = ctx.config_path or ctx.cfg.source
    return web.json_response(
        {
            "version": __version__,
            "pid": os.getpid(),
            "started": started,
            "uptime_s": max(0.0, time.time() - started),
            "rss_bytes": rss_bytes(),
            "state_dir": str(ctx.cfg.agent.state_dir),
            "config_path": str(path) if path else None,
            "outage": pending.view(ctx.store),  # None, or since when and how many are kept
        }
    )


def register(app: web.Application) -> None:
    app.router.add_get("/api/system", guarded(system))
