"""A running daemon follows the tool jobs other processes store: ``chela chat`` without a
daemon of its own, the Control UI's edits, a second CLI.  Every :data:`SYNC_EVERY` seconds
the stored job table is compared with the jobs being run; a job that appeared or changed is
run from then on, one that is gone is no longer run (pause state is read at each run)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from bot.schedule.jobs import Job
from bot.schedule.registry import tool_jobs

log = logging.getLogger("chela.schedule")

SYNC_EVERY = 2.0  # seconds: a job added elsewhere is seen well within 5 s


def _shape(job: Job) -> tuple:
    """What makes two versions of a job run differently."""
    return (job.kind, job.spec, job.prompt, job.target, job.to, job.catch_up, job.anchor)


def sync_once(svc: Any) -> tuple[list[str], list[str]]:
    """Bring the jobs being run in line with the store; (adopted, forgotten) names."""
    stored = {j.name: j for j in tool_jobs(svc.store)}
    running = {j.name: j for j in svc.registry.jobs() if j.source == "tool"}
    adopted = [
        name
        for name, job in stored.items()
        if svc.registry.get(name) is None
        or (name in running and _shape(running[name]) != _shape(job))
    ]
    for name in adopted:
        svc.adopt(stored[name])
    gone = [name for name in running if name not in stored]
    for name in gone:
        svc.forget(name)
    return adopted, gone


async def follow(svc: Any, every: float = SYNC_EVERY) -> None:
    """:func:`sync_once` every ``every`` seconds once the scheduler has booted."""
    await svc.booted.wait()
    while True:
        await asyncio.sleep(every)
        try:
            adopted, gone = sync_once(svc)
        except Exception:
            log.exception("reading the stored jobs failed")
            continue
        for name in adopted:
            log.info("schedule %s: added or changed by another process; following it", name)
        for name in gone:
            log.info("schedule %s: removed by another process", name)
