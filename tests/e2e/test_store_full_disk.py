"""A full disk under the state dir (issue 27 item 13): one clear log line naming the state dir
when writes fail for lack of space, one when they work again, nothing per failed write; and
nothing lost.  The database is really full here: SQLite's page limit gives the same
SQLITE_FULL ("database or disk is full") a full file system gives."""

from __future__ import annotations

import itertools
import logging

from tests.e2e import eventually, running
from tests.e2e.test_outbox import CHATS, cfg_for, echo, replies


WRITES = ("INSERT", "UPDATE", "DELETE", "REPLACE")


def lines(caplog, text: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if text in r.getMessage()]


def fill(db) -> None:
    db.execute(f"PRAGMA max_page_count = {db.execute('PRAGMA page_count').fetchone()[0]}")


async def test_a_full_disk_is_said_naming_the_state_dir_not_once_per_failure(
    tmp_path, llm, tg, caplog
):
    llm.default = echo
    caplog.set_level(logging.INFO, logger="chela")
    cfg = cfg_for(tmp_path, llm, tg)
    state = str(cfg.agent.state_dir)
    async with running(cfg) as d:
        fill(d.store.db)
        for k in range(1, 40):  # enough rows that the pages left are used up
            for c in CHATS:
                tg.inject_message(c, f"c{c}-m{k}" + " pad" * 200, from_id=c)
        writes: list[str] = []  # every write statement SQLite is asked to run
        d.store.db.set_trace_callback(
            lambda sql: writes.append(sql) if sql.lstrip().upper().startswith(WRITES) else None
        )
        await eventually(lambda: lines(caplog, "disk full: "), timeout=20)
        # more writes are tried meanwhile: no line per failure.  (Measured: the page limit
        # here makes only the first write fail, so this does not yet see a second failure.)
        tried = len(writes)
        await eventually(lambda: len(writes) >= tried + 2, timeout=20)
        d.store.db.set_trace_callback(None)
        d.store.db.execute("PRAGMA max_page_count = 1073741823")  # space is back
        await tg.wait_for_sent(3 * 39, timeout=120)
        await eventually(lambda: said(caplog)[-1:] == ["room"], timeout=30)
    # a page limit leaves a little room now and then (a deleted row frees a page), so the
    # state may change more than once; what is said alternates, never twice the same
    kinds = said(caplog)
    assert kinds[0] == "full" and kinds[-1] == "room", kinds
    assert all(a != b for a, b in itertools.pairwise(kinds)), kinds
    named = lines(caplog, "disk full: ") + lines(caplog, "disk space is back")
    assert all(state in m for m in named)


def said(caplog) -> list[str]:
    out = []
    for r in caplog.records:
        if "disk full: " in r.getMessage():
            out.append("full")
        elif "disk space is back" in r.getMessage():
            out.append("room")
    return out


async def test_with_room_on_disk_nothing_is_said_about_space(tmp_path, llm, tg, caplog):
    llm.default = echo
    caplog.set_level(logging.INFO, logger="chela")
    async with running(cfg_for(tmp_path, llm, tg)):
        for c in CHATS:
            tg.inject_message(c, f"c{c}-m1", from_id=c)
        await tg.wait_for_sent(3, timeout=30)
        assert replies(tg, 42) == ["re c42-m1"]
    assert not lines(caplog, "disk full: ") and not lines(caplog, "disk space is back")
