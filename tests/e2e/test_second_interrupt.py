"""A second Ctrl-C during the shutdown grace stops at once (issue 37, "also seen"): ``chela
run`` with a turn in flight (the fake LLM slow to answer), SIGINT twice: it exits within a
few seconds instead of waiting out the drain, says what it left, the message stays stored,
and the next ``chela run`` answers it.  The twin: one SIGINT waits for the turn, which is
answered before the exit."""

from __future__ import annotations

import asyncio
import signal
import sqlite3
import time
from pathlib import Path

from tests.e2e import eventually
from tests.e2e.harness import config_file, telegram_section
from tests.e2e.test_first_hour import start_daemon, stop
from tests.fakes.llm import delay, last_user_text, text

SLOW = 60.0  # the turn in flight: far longer than the drain (10 s)


def daemon_config(tmp_path: Path, llm, tg) -> Path:
    return config_file(
        tmp_path / "config.toml",
        llm,
        workspace=tmp_path / "ws",
        state_dir=tmp_path / "state",
        channels=telegram_section(tg),
    )


def inbound_statuses(tmp_path: Path) -> list[str]:
    db = sqlite3.connect(f"file:{tmp_path / 'state' / 'chela.sqlite3'}?mode=ro", uri=True)
    try:
        return [r[0] for r in db.execute("SELECT status FROM inbound ORDER BY id")]
    finally:
        db.close()


async def wait_exit(proc, timeout: float) -> int | None:
    try:
        return await asyncio.to_thread(proc.wait, timeout)
    except Exception:
        return None


async def test_second_sigint_stops_at_once_and_the_message_is_answered_after(tmp_path, llm, tg):
    cfg = daemon_config(tmp_path, llm, tg)
    log = tmp_path / "run.log"
    proc = start_daemon(cfg, log)
    try:
        await eventually(lambda: "ready in" in log.read_text(), timeout=60)
        await tg.wait_for_call("getUpdates", 1, timeout=30)  # polling
        llm.script(delay(SLOW, text("too late")))
        tg.inject_message(42, "what is the capital of France?", from_id=42)
        await llm.wait_for_requests(1, timeout=30)  # the turn is in flight
        proc.send_signal(signal.SIGINT)
        await eventually(lambda: "waiting up to" in log.read_text(), timeout=10)
        t0 = time.monotonic()
        proc.send_signal(signal.SIGINT)
        rc = await wait_exit(proc, 20)
        took = time.monotonic() - t0
    finally:
        stop(proc)
    out = log.read_text()
    assert rc == 0, out
    assert took < 8, f"took {took:.1f}s after the second Ctrl-C\n{out}"
    assert (
        "stopping now: turns in progress cut short: 1;" in out and "answered after restart" in out
    ), out
    assert "Traceback" not in out
    assert tg.sent == []  # nothing half-said
    assert inbound_statuses(tmp_path) == ["pending"]  # the message stays stored
    # the next run answers it
    llm.reset()
    llm.script(text("Paris."))
    proc = start_daemon(cfg, tmp_path / "run2.log")
    try:
        sent = await tg.wait_for_sent(1, timeout=60)
    finally:
        assert stop(proc) == 0
    assert sent[0].visible_text == "Paris."
    assert "capital of France" in last_user_text(llm.requests[0])


async def test_one_sigint_waits_for_the_turn_in_flight(tmp_path, llm, tg):
    cfg = daemon_config(tmp_path, llm, tg)
    log = tmp_path / "run.log"
    proc = start_daemon(cfg, log)
    try:
        await eventually(lambda: "ready in" in log.read_text(), timeout=60)
        await tg.wait_for_call("getUpdates", 1, timeout=30)  # polling
        llm.script(delay(2.0, text("Paris.")))
        tg.inject_message(42, "what is the capital of France?", from_id=42)
        await llm.wait_for_requests(1, timeout=30)
        proc.send_signal(signal.SIGINT)
        rc = await wait_exit(proc, 30)
    finally:
        stop(proc)
    out = log.read_text()
    assert rc == 0, out
    assert "stopping now" not in out
    assert [m.visible_text for m in tg.sent] == ["Paris."]
    assert inbound_statuses(tmp_path) == ["done"]
