"""One scheduler (issue 37): ``chela chat`` next to a running ``chela run`` is a client of
it.  A reminder asked for in the chat (the fake LLM calls the cron tool, ``in: 3s``) is
created and run by the daemon and arrives at the owner's Telegram chat (the terminal cannot
be reached later); the tool's answer says where it goes.  The chat streams the reply and
stops a slow one with ``/stop``.  A job another process stores is picked up by the running
daemon within 5 s.  Without a daemon the chat stores the job and the next ``chela run`` runs
it (catch-up).  ``chela run`` is a subprocess against the fake Telegram and the fake LLM;
the chat runs on a real pseudo-terminal."""

from __future__ import annotations

import asyncio
import socket
import sqlite3
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from tests.e2e import TG_TOKEN
from tests.e2e.test_crash import ROOT, start, stop, write_config
from tests.e2e.test_first_hour_pty import expect, spawn
from tests.fakes.llm import streamed, text, tool_calls

OWNER = 42
REPLY = "Time to water the plants"
REMIND = tool_calls([("cron", {"action": "add", "name": "plants", "prompt": "water", "in": "3s"})])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def setup(tmp_path: Path, llm, tg, *, http: bool = True) -> Path:
    """Telegram (the owner's chat) and the HTTP API on a free loopback port; the default
    tools (cron among them)."""
    telegram = {
        "enabled": True,
        "token_env": "TEST_TG_TOKEN",
        "api_base": tg.api_base,
        "poll_timeout": 1,
        "allow_from": [str(OWNER)],
    }
    sections = {"channels.telegram": telegram}
    if http:
        sections["channels.http"] = {"enabled": True, "listen": f"127.0.0.1:{free_port()}"}
    llm.default = lambda request: text(REPLY)
    return write_config(tmp_path, llm, sections, ui={"enabled": False})


async def ready(log_path: Path, proc: subprocess.Popen) -> None:
    for _ in range(300):
        if log_path.exists() and "ready in" in log_path.read_text(errors="replace"):
            return
        assert proc.poll() is None, log_path.read_text(errors="replace")
        await asyncio.sleep(0.1)
    raise AssertionError("the daemon did not get ready")


async def owner_writes_once(tg, llm) -> None:
    """The owner's Telegram chat becomes the `last` route."""
    llm.script(text("Hello!"))
    tg.inject_message(OWNER, "hi", from_id=OWNER)
    await tg.wait_for(lambda: any("Hello!" in s.text for s in tg.sent), timeout=30)


def delivered(tg) -> list[str]:
    return [s.text for s in tg.sent if s.chat_id == OWNER and REPLY in s.text]


def ledger(db_path: Path) -> list[tuple]:
    db = sqlite3.connect(db_path)
    try:
        return db.execute("SELECT job, status, reason, catch_up FROM schedule_ledger").fetchall()
    finally:
        db.close()


def tool_answers(llm) -> list[str]:
    return [
        str(m.get("content"))
        for req in llm.requests
        for m in req["messages"]
        if m["role"] == "tool"
    ]


async def test_a_reminder_from_the_chat_runs_in_the_daemon_and_reaches_telegram(tmp_path, llm, tg):
    cfg = setup(tmp_path, llm, tg)
    db_path = tmp_path / "state" / "chela.sqlite3"
    log_path = tmp_path / "daemon.log"
    proc = start(cfg, log_path)
    child = None
    try:
        await ready(log_path, proc)
        await owner_writes_once(tg, llm)
        llm.script(REMIND, streamed("I will remind ", "you at the time."))
        child = spawn(["chat", "--config", str(cfg)], tmp_path)
        await expect(child, rf"connected to the running daemon \(pid {proc.pid}\)")
        await expect(child, "you>")
        child.send("remind me in 3 seconds to water the plants\r")
        await expect(child, "I will remind you at the time.")
        await expect(child, "you>")
        await tg.wait_for(lambda: delivered(tg), timeout=30)  # run by the daemon
        await tg.wait_for(lambda: ledger(db_path)[0][1] == "ran", timeout=10)
        assert any("it will be sent to your Telegram chat" in t for t in tool_answers(llm))

        # a slow streamed reply: its first words show, then /stop typed stops it
        gate = asyncio.Event()
        llm.script(streamed("A long story begins", " and goes on and on.", gate=gate))
        child.send("tell me a long story\r")
        await expect(child, "A long story begins")
        child.send("/stop\r")
        await expect(child, "Stopped.")
        await expect(child, "you>")
        gate.set()
        llm.script(text("Here again."))
        child.send("still there?\r")  # twin: the next message is answered normally
        await expect(child, "Here again.")
        child.send("exit\r")
        await asyncio.to_thread(child.expect, "\\Z|$", timeout=15)
    finally:
        if child is not None:
            child.close(force=True)
        rc = stop(proc)
    assert rc == 0
    assert delivered(tg) == [REPLY]  # once, to the owner's Telegram chat
    assert ledger(db_path) == [("plants", "ran", "", 0)]
    assert "and goes on and on" not in child.before + str(child.buffer)
    assert "tell me a long story" in str(llm.requests)
    # stopped in the daemon, not only hidden here: its partial answer is not in the history
    assert "goes on and on" not in str(llm.requests[-1]["messages"])


async def test_a_job_stored_by_another_process_is_run_within_5_seconds(tmp_path, llm, tg):
    from bot.store import Store

    cfg = setup(tmp_path, llm, tg, http=False)
    log_path = tmp_path / "daemon.log"
    proc = start(cfg, log_path)
    try:
        await ready(log_path, proc)
        store = Store(tmp_path / "state" / "chela.sqlite3")
        now = time.time()
        at = datetime.fromtimestamp(now + 1, UTC).isoformat()
        assert store.add_cron_job(
            "plants", "at", at, "water", target="telegram", to=str(OWNER), anchor=now
        )
        store.close()
        await tg.wait_for(lambda: delivered(tg), timeout=10)
        took = time.time() - now
    finally:
        rc = stop(proc)
    assert took < 1 + 5 + 2  # due in 1 s, seen within 5 s, sent at once
    assert "plants: added or changed by another process" in log_path.read_text()
    assert delivered(tg) == [REPLY] and rc == 0


async def test_without_a_daemon_the_chat_stores_the_job_and_the_next_run_runs_it(tmp_path, llm, tg):
    cfg = setup(tmp_path, llm, tg)
    db_path = tmp_path / "state" / "chela.sqlite3"
    log_path = tmp_path / "daemon.log"
    add = {"action": "add", "name": "plants", "prompt": "water", "in": "2s"}
    llm.script(
        tool_calls([("cron", {**add, "target": "telegram", "to": str(OWNER)})]),
        text("I will remind you."),
    )
    env = {"TEST_TG_TOKEN": TG_TOKEN, "PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    chat = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "bot", "chat", "--config", str(cfg), "-m", "remind me in 3s"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert chat.returncode == 0, chat.stderr
    assert "I will remind you." in chat.stdout
    assert any("the daemon is not running now" in t for t in tool_answers(llm))
    await asyncio.sleep(2)  # due while no daemon runs: the chat never runs it
    assert delivered(tg) == []
    proc = start(cfg, log_path)
    try:
        await tg.wait_for(lambda: delivered(tg), timeout=30)  # caught up at the next start
        await tg.wait_for(lambda: ledger(db_path)[0][1] == "ran", timeout=10)
    finally:
        rc = stop(proc)
    assert delivered(tg) == [REPLY] and rc == 0
    assert [row[:3] for row in ledger(db_path)] == [("plants", "ran", "")]
