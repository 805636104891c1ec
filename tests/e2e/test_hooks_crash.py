"""A webhook's event is stored before its 202, so a crash cannot lose it: ``chela run`` as a
subprocess is killed with SIGKILL after answering 202 while the event's turn waits on the
model; after the restart the turn runs, once, and its reply reaches Telegram once.  The
twin: without a kill the event runs once too."""

from __future__ import annotations

import asyncio
import os
import re
import socket
import sqlite3
import subprocess
import sys
from pathlib import Path

import aiohttp

from tests.e2e.test_crash import ROOT, eventually, kill9, start, stop, toml
from tests.e2e.test_hooks_e2e import SECRET, signed
from tests.fakes.llm import delay, text

OWNER = 42
ANSWER = "the deploy hook needs you"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write(tmp_path: Path, llm, tg, port: int) -> Path:
    sections = {
        "agent": {
            "workspace": str(tmp_path / "ws"),
            "state_dir": str(tmp_path / "state"),
            "model": "openai/fake-model",
            "api_base": llm.base_url,
            "timezone": "UTC",
            "llm_max_retries": 1,
        },
        "heartbeat": {"every": "0m"},
        "channels.telegram": {
            "enabled": True,
            "token_env": "TEST_TG_TOKEN",
            "api_base": tg.api_base,
            "poll_timeout": 1,
            "allow_from": [str(OWNER)],
        },
        "channels.http": {
            "enabled": True,
            "listen": f"127.0.0.1:{port}",
            "token_env": "TEST_TG_TOKEN",
        },
        "[hooks]": {
            "name": "deploy",
            "scheme": "github",
            "secret_env": "TEST_HOOK_SECRET",
            "prompt": "Deploy event:\n{body}",
            "deliver": f"telegram:{OWNER}",
        },
    }
    path = tmp_path / "config.toml"
    path.write_text(toml(sections))
    return path


def hook_turns(db_path: Path) -> int:
    db = sqlite3.connect(db_path)
    try:
        q = "SELECT COUNT(DISTINCT turn) FROM messages WHERE kind='hook' AND role='user'"
        return db.execute(q).fetchone()[0]
    finally:
        db.close()


async def send_event(port: int) -> int:
    body = b'{"ref": "refs/heads/main"}'
    url = f"http://127.0.0.1:{port}/hooks/deploy"
    for _ in range(200):  # the daemon may still be starting
        try:
            async with (
                aiohttp.ClientSession() as s,
                s.post(url, data=body, headers=signed("github", body, "crash-1")) as r,
            ):
                return r.status
        except aiohttp.ClientConnectionError:
            await asyncio.sleep(0.1)
    raise AssertionError("the daemon never listened")


def replies(tg) -> list[str]:
    return [s.text for s in tg.sent if s.chat_id == OWNER and ANSWER in s.text]


async def test_kill_9_after_the_202_runs_the_turn_once_after_restart(
    tmp_path, llm, tg, monkeypatch
):
    monkeypatch.setenv("TEST_HOOK_SECRET", SECRET)
    port = free_port()
    cfg = write(tmp_path, llm, tg, port)
    db_path = tmp_path / "state" / "chela.sqlite3"
    llm.script(delay(60, text("never seen")))  # the first run waits on the model: kill then
    llm.default = lambda request: text(ANSWER)
    log_path = tmp_path / "daemon.log"
    proc = start(cfg, log_path)
    try:
        assert await send_event(port) == 202
        await llm.wait_for_requests(1, timeout=30)  # the turn began
        kill9(proc)
        assert replies(tg) == []
        proc = start(cfg, log_path)
        await tg.wait_for(lambda: replies(tg), timeout=60)
        assert await send_event(port) == 200  # the redelivery is a duplicate, after a crash too
        await asyncio.sleep(1.0)  # anything run twice would show by now
    finally:
        rc = stop(proc)
    assert replies(tg) == [ANSWER]
    assert hook_turns(db_path) == 1
    assert rc == 0
    assert SECRET not in log_path.read_text()


async def test_without_a_kill_the_event_runs_once(tmp_path, llm, tg, monkeypatch):
    monkeypatch.setenv("TEST_HOOK_SECRET", SECRET)
    port = free_port()
    cfg = write(tmp_path, llm, tg, port)
    llm.default = lambda request: text(ANSWER)
    proc = start(cfg, tmp_path / "daemon.log")
    try:
        assert await send_event(port) == 202
        await tg.wait_for(lambda: replies(tg), timeout=60)
        await eventually(lambda: hook_turns(tmp_path / "state" / "chela.sqlite3") == 1, 10)
    finally:
        rc = stop(proc)
    assert replies(tg) == [ANSWER]
    assert rc == 0
    env = {**os.environ, "TEST_TG_TOKEN": "x", "PYTHONPATH": str(ROOT)}
    chela = [sys.executable, "-m", "bot", "hooks"]
    log = subprocess.run([*chela, "log", "--config", str(cfg)], env=env, capture_output=True)
    assert log.returncode == 0, log.stderr
    assert re.search(rb"deploy +crash-1 +accepted +delivered to telegram:42", log.stdout)
    listed = subprocess.run([*chela, "list", "--config", str(cfg)], env=env, capture_output=True)
    assert b"POST /hooks/deploy" in listed.stdout and b"accepted" in listed.stdout
