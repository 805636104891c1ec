"""Scheduled backups: one archive per occurrence, each a ledger row, the oldest pruned beyond
``keep``, one catch-up after a downtime, and a failure told to the owner once."""

from __future__ import annotations

import asyncio

from bot.schedule.backups import JOB, Backups
from bot.schedule.clock import ManualClock
from bot.store import Store
from bot.store.backup import archives, backups_dir
from tests.unit.store.test_backup import home

T0 = 1_800_000_000.0
HOUR = 3600.0


async def started(cfg, clock, told):
    store = Store(cfg.db_path)

    async def tell(text: str) -> None:
        told.append(text)

    task = asyncio.ensure_future(Backups(cfg, store, clock, tell).forever())
    await clock.advance(0)
    return store, task


async def settle(clock: ManualClock, until) -> None:
    for _ in range(500):
        if until():
            return
        await asyncio.sleep(0.01)
        await clock.advance(0)
    raise AssertionError("not reached")


async def test_each_occurrence_writes_an_archive_and_a_ledger_row_and_prunes(tmp_path):
    cfg = home(tmp_path, backup={"every": "1h", "keep": 2})
    clock, told = ManualClock(T0), []
    store, task = await started(cfg, clock, told)
    try:
        for k in range(1, 4):
            await clock.advance(HOUR)
            await settle(
                clock,
                lambda k=k: (
                    len(store.ledger_rows(JOB)) == k
                    and store.ledger_rows(JOB)[-1]["status"] == "ran"
                ),
            )
        rows = store.ledger_rows(JOB)
        assert [r["due"] for r in rows] == [T0 + HOUR, T0 + 2 * HOUR, T0 + 3 * HOUR]
        assert all(r["detail"].startswith("saved chela-backup-") for r in rows)
        assert len(archives(backups_dir(cfg))) == 2  # keep = 2
        assert told == []
    finally:
        task.cancel()
        store.close()


async def test_after_a_downtime_one_catch_up_and_the_rest_missed(tmp_path):
    cfg = home(tmp_path, backup={"every": "1h"})
    clock, told = ManualClock(T0), []
    store, task = await started(cfg, clock, told)
    task.cancel()
    store.close()
    clock.set(T0 + 5.5 * HOUR)  # down for five occurrences
    store, task = await started(cfg, clock, told)
    try:
        await settle(clock, lambda: any(r["status"] == "ran" for r in store.ledger_rows(JOB)))
        rows = store.ledger_rows(JOB)
        assert [r["status"] for r in rows] == ["missed"] * 4 + ["ran"]
        assert rows[-1]["catch_up"] and rows[-1]["due"] == T0 + 5 * HOUR
        assert len(archives(backups_dir(cfg))) == 1
    finally:
        task.cancel()
        store.close()


async def test_a_failure_reaches_the_owner_once_until_a_backup_works(tmp_path):
    folder = tmp_path / "not-a-dir"
    folder.write_text("a file where the backups should go")
    cfg = home(tmp_path, backup={"every": "1h", "dir": str(folder)})
    clock, told = ManualClock(T0), []
    store, task = await started(cfg, clock, told)
    try:
        for k in (1, 2):
            await clock.advance(HOUR)
            await settle(
                clock, lambda k=k: [r["status"] for r in store.ledger_rows(JOB)] == ["ran"] * k
            )
        rows = store.ledger_rows(JOB)
        assert all(r["detail"].startswith("failed (") for r in rows)
        assert len(told) == 1 and told[0].startswith("The scheduled backup failed:")
        folder.unlink()  # fixed: the next one works, and a later failure is told again
        await clock.advance(HOUR)
        await settle(
            clock,
            lambda: (
                len(store.ledger_rows(JOB)) == 3 and store.ledger_rows(JOB)[-1]["status"] == "ran"
            ),
        )
        assert store.ledger_rows(JOB)[-1]["detail"].startswith("saved ")
    finally:
        task.cancel()
        store.close()


async def test_every_0m_turns_them_off(tmp_path):
    cfg = home(tmp_path, backup={"every": "0m"})
    clock, told = ManualClock(T0), []
    store, task = await started(cfg, clock, told)
    try:
        await clock.advance(30 * 24 * HOUR)
        assert task.done() and store.ledger_rows(JOB) == []
    finally:
        store.close()
