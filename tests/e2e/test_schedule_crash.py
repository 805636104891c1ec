"""A scheduled run is never run twice (SPEC §17.5): ``chela run`` as a subprocess against the
fake Telegram and the fake LLM.  The job's reply is held on the wire and the daemon is killed
with SIGKILL: its turn and reply are stored, its ledger row says ``running``.  After the
restart the reply is delivered exactly once (the outbox sends the stored row), the model is
not asked again, and the ledger row is closed as an interrupted run.  The twin: without a
kill the job runs and is delivered once, its row ``ran (delivered)``."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

from tests.e2e.test_crash import kill9, start, stop, write_config
from tests.fakes.llm import text, tool_calls

OWNER = 42
REPLY = "Time to water the plants"


def setup(tmp_path: Path, llm, tg) -> tuple[Path, Path]:
    """A daemon with the cron tool; the owner's message makes the model add a job due in 3 s
    (made once the daemon is up, so a slow start cannot make it past)."""
    llm.script(
        tool_calls([("cron", {"action": "add", "name": "plants", "prompt": "water", "in": "3s"})]),
        text("I will remind you."),
    )
    llm.default = lambda request: text(REPLY)
    section = {
        "enabled": True,
        "token_env": "TEST_TG_TOKEN",
        "api_base": tg.api_base,
        "poll_timeout": 1,
        "allow_from": [str(OWNER)],
    }
    cfg = write_config(tmp_path, llm, {"channels.telegram": section}, tools={"enabled": ["cron"]})
    return cfg, tmp_path / "state" / "chela.sqlite3"


async def ask_for_the_reminder(tg) -> None:
    tg.inject_message(OWNER, "remind me in 3 seconds to water the plants", from_id=OWNER)
    await tg.wait_for(lambda: any("I will remind you" in s.text for s in tg.sent), timeout=60)


def ledger(db_path: Path) -> list[tuple]:
    db = sqlite3.connect(db_path)
    try:
        return db.execute("SELECT job, status, reason, detail FROM schedule_ledger").fetchall()
    finally:
        db.close()


def delivered(tg) -> list[str]:
    return [s.text for s in tg.sent if s.chat_id == OWNER and REPLY in s.text]


async def test_kill_9_after_a_job_ran_does_not_run_it_again(tmp_path, llm, tg):
    cfg, db_path = setup(tmp_path, llm, tg)
    log_path = tmp_path / "daemon.log"
    tg.hold_sends(lambda params: REPLY in str(params.get("text", "")))
    proc = start(cfg, log_path)
    try:
        await ask_for_the_reminder(tg)
        await tg.wait_for(lambda: [c for c in tg.calls_of("sendMessage") if REPLY in str(c)], 60)
        kill9(proc)  # the run is over and its reply on the wire, held
        tg.refuse_held()
        assert delivered(tg) == []
        assert ledger(db_path) == [("plants", "running", "", "")]
        proc = start(cfg, log_path)
        await tg.wait_for(lambda: delivered(tg), timeout=60)
        await asyncio.sleep(2)  # a second run or send would show now
    finally:
        rc = stop(proc)
    assert delivered(tg) == [REPLY]
    assert len(llm.requests) == 3  # two for the chat turn, one for the job: never again
    assert ledger(db_path) == [("plants", "ran", "", "interrupted (the daemon stopped)")]
    assert rc == 0


async def test_twin_without_a_kill_the_job_runs_once(tmp_path, llm, tg):
    cfg, db_path = setup(tmp_path, llm, tg)
    proc = start(cfg, tmp_path / "daemon.log")
    try:
        await ask_for_the_reminder(tg)
        await tg.wait_for(lambda: delivered(tg), timeout=60)
        await asyncio.sleep(2)
    finally:
        rc = stop(proc)
    assert delivered(tg) == [REPLY]
    assert ledger(db_path) == [("plants", "ran", "", "delivered")]
    assert rc == 0
