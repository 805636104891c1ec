"""Housekeeping the daemon does on its own, soon after start and then hourly: downloaded
media past ``media.retention_days`` and the HTTP API's stateless sessions."""

from __future__ import annotations

import asyncio
import logging
import time

from bot.config import Config
from bot.store import Store

log = logging.getLogger("chela.heartbeat")

STATELESS_MARKER = (
    "-stateless:"  # the session key of a request without `user` (bot/rules/admission.py)
)
STATELESS_KEEP = 86400.0  # seconds a stateless HTTP API session is kept after its request
EVERY = 3600.0


async def prune_media(cfg: Config, store: Store) -> int:
    """Delete inbound media past its retention: the owner's media dir and each guest's.
    Also the HTTP API's stateless sessions a day after their request (nothing continues
    them; their usage rows stay)."""
    from bot.fs import prune_older_than

    try:
        gone = store.prune_throwaway_sessions(STATELESS_MARKER, time.time() - STATELESS_KEEP)
        if gone:
            log.info("pruned %d stateless HTTP API session(s)", gone)
    except Exception:
        log.exception("pruning stateless sessions failed")

    days = cfg.media.retention_days
    dirs = [cfg.media_dir, *sorted(cfg.guests_dir.glob("*/media"))]
    try:
        removed = sum(
            [await asyncio.to_thread(prune_older_than, d, days) for d in dirs if d.is_dir()]
        )
    except asyncio.CancelledError:
        return 0  # shutting down: the next start prunes again
    except Exception:
        log.exception("pruning media failed")
        return 0
    if removed:
        log.info("pruned %d media file(s) older than %g days", removed, days)
    return removed


async def prune_forever(cfg: Config, store: Store) -> None:
    while True:
        await prune_media(cfg, store)
        await asyncio.sleep(EVERY)
