"""Scheduled backups (``[backup] every/keep/dir``) by the running daemon.

Occurrences fall on a grid from an anchor kept in the database (the first start that saw
the schedule), like an ``every`` job's; each one is a ledger row under the name
``[backup]`` (a name no ``[[cron]]`` job can take).  One that fell due while the daemon was
down runs once at start (catch-up), the older ones are ``missed``.  After each archive the
oldest beyond ``keep`` are pruned.  A failure is logged, and the owner is told once, until a
backup works again."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from bot.config import Config
from bot.schedule.clock import Clock
from bot.schedule.jobs import Job, due_between, next_after
from bot.schedule.turns import Scheduled
from bot.store import Store
from bot.store.backup import BackupError, backups_dir, prune, take

log = logging.getLogger("chela.backup")

JOB = "[backup]"

Tell = Callable[[str], Awaitable[object]]
T = TypeVar("T")


async def off_loop(fn: Callable[..., T], *args: Any, **kw: Any) -> T:
    """``fn`` in a thread of its own, not the loop's default executor: ``asyncio.run`` joins
    that one when the daemon stops, and a stop must not wait for a long backup to end (its
    partial file is removed by a later prune; its ledger row is closed at the next start)."""
    pool = ThreadPoolExecutor(1, thread_name_prefix="chela-backup")
    try:
        return await asyncio.wrap_future(pool.submit(fn, *args, **kw))
    finally:
        pool.shutdown(wait=False)


class Backups:
    def __init__(self, cfg: Config, store: Store, clock: Clock, tell: Tell) -> None:
        self.cfg = cfg
        self.store = store
        self.clock = clock
        self.tell = tell
        self.told = False  # the owner knows backups fail (until one works again)

    def job(self) -> Job:
        every = self.cfg.backup.every
        state = self.store.job_seen(JOB, f"every {every}", self.clock.now())
        return Job(JOB, "every", every, source="config").with_anchor(state["anchor"])

    async def forever(self) -> None:
        if self.cfg.backup.every_seconds <= 0:
            return
        job = self.job()
        while True:
            last = self.store.ledger_last_due(JOB)
            since = job.anchor if last is None else max(last, job.anchor)
            dues, _ = due_between(job, since, self.clock.now(), None)
            nxt = next_after(job, since, None)
            if dues:  # one or more fell due while the daemon was down (or busy)
                for due in dues[:-1]:
                    self.store.ledger_note(JOB, due, "missed", "superseded by catch-up")
                await self.once(dues[-1], catch_up=len(dues) > 1 or self.late(dues[-1]))
                continue
            if nxt is None:
                return
            await self.clock.sleep_until(nxt)

    def late(self, due: float) -> bool:
        return self.clock.now() - due > 60

    async def once(self, due: float, *, catch_up: bool = False) -> str:
        """One backup for the occurrence ``due``: its ledger row's detail."""
        run_id = uuid.uuid4().hex
        if not self.store.ledger_begin(JOB, due, run_id, catch_up=catch_up):
            return ""  # this occurrence has its row already: never run twice
        try:
            done = await off_loop(take, self.cfg, reason="scheduled")
        except BackupError as e:
            detail = f"failed ({e})"
            self.store.ledger_end(run_id, "ran", "", detail)
            log.error("scheduled backup failed: %s", e)
            if not self.told:
                self.told = True
                await self.tell(f"The scheduled backup failed: {e}")
            return detail
        self.told = False
        gone = await off_loop(prune, backups_dir(self.cfg), self.cfg.backup.keep)
        detail = f"saved {done.path.name} ({done.size} bytes)"
        self.store.ledger_end(run_id, "ran", "", detail)
        log.info(
            "scheduled backup %s (%d bytes, %.1fs)%s",
            done.path,
            done.size,
            done.seconds,
            f"; pruned {len(gone)} older" if gone else "",
        )
        return detail


async def scheduled(
    cfg: Config, store: Store, clock: Clock, booted: asyncio.Event, turns: Scheduled
) -> None:
    """The daemon's backup loop, once the scheduler has settled the ledger at start
    (``booted``); a failure is told to the owner the way the missed-jobs note is."""
    from bot.schedule import notes

    async def tell(text: str) -> object:
        return await notes.send_note(cfg, store, turns.outbox, turns.channels, text)

    await booted.wait()
    try:
        await Backups(cfg, store, clock, tell).forever()
    except asyncio.CancelledError:
        raise
    except Exception:
        log.exception("the backup schedule failed")
