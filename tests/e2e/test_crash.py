"""Crash tests (SPEC §4.5): ``chela run`` as a subprocess against the fake platforms and the
fake LLM, killed with SIGKILL while it replies, restarted each time.

Nothing may be lost; the only possible duplicates are the sends in flight at a kill (the
outbox rows in state 'sending', counted from the database right after each kill); per-chat
order is kept.  On Discord the outbox's nonce makes even those sends unique.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from tests.e2e import TG_TOKEN
from tests.e2e.harness import store_idle, tg_taken
from tests.fakes.discord import FakeDiscord
from tests.fakes.llm import last_user_text, text

ROOT = Path(__file__).resolve().parents[2]
TOKEN_RE = re.compile(r"c(\d+)-m(\d+)")


def toml(sections: dict[str, dict]) -> str:
    lines: list[str] = []
    for name, values in sections.items():
        lines.append(f"[{name}]")
        lines += [f"{k} = {json.dumps(v)}" for k, v in values.items()]  # JSON scalars are TOML
    return "\n".join(lines) + "\n"


def write_config(tmp_path: Path, llm, channel: dict[str, dict], **extra: dict) -> Path:
    sections = {
        "agent": {
            "workspace": str(tmp_path / "ws"),
            "state_dir": str(tmp_path / "state"),
            "model": "openai/fake-model",
            "api_base": llm.base_url,
            "timezone": "UTC",
            "llm_max_retries": 1,
        },
        "session": {"dm_scope": "per-channel-peer", "max_concurrent_turns": 8},
        "heartbeat": {"every": "0m"},
        **channel,
        **extra,
    }
    path = tmp_path / "config.toml"
    path.write_text(toml(sections))
    return path


def start(cfg_path: Path, log_path: Path) -> subprocess.Popen:
    env = {
        **os.environ,
        "TEST_TG_TOKEN": TG_TOKEN,
        "TEST_DC_TOKEN": DC_TOKEN,
        "PYTHONPATH": str(ROOT),
    }
    with open(log_path, "ab") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "bot", "run", "--config", str(cfg_path)],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )


def kill9(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)


def stop(proc: subprocess.Popen) -> int:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            return proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
    return proc.returncode


def in_flight(db_path: Path) -> int:
    """Outbox rows whose platform call had started when the process died."""
    db = sqlite3.connect(db_path)
    try:
        return db.execute("SELECT COUNT(*) FROM outbox WHERE state='sending'").fetchone()[0]
    finally:
        db.close()


def echo(request: dict):
    m = TOKEN_RE.search(last_user_text(request))
    return text(f"re {m.group(0)}" if m else "ok")


def check_replies(sent: list[tuple[int, str]], chats: list[int], per_chat: int) -> dict:
    """Lost, duplicated and out-of-order replies; ``sent`` is (chat, text) in send order."""
    seen: dict[str, int] = defaultdict(int)
    order: dict[int, list[int]] = defaultdict(list)
    for chat, body in sent:
        m = TOKEN_RE.search(body)
        assert m and int(m.group(1)) == chat, (chat, body)  # never to the wrong chat
        seen[m.group(0)] += 1
        if seen[m.group(0)] == 1:
            order[chat].append(int(m.group(2)))
    want = {f"c{c}-m{k}" for c in chats for k in range(per_chat)}
    return {
        "lost": sorted(want - set(seen)),
        "duplicates": sum(n - 1 for n in seen.values()),
        "out_of_order": [c for c in chats if order[c] != sorted(order[c])],
    }


# ------------------------------------------------------------------------------- Telegram
CHATS = 20
PER_CHAT = 15  # 300 messages
KILL_AT = (50, 120, 190)  # replies seen by the platform when each kill lands


async def test_kill_9_while_replying_loses_nothing_and_duplicates_only_in_flight_sends(
    tmp_path, llm, tg
):
    async def slow_echo(request: dict):
        await asyncio.sleep(0.05)  # replies trickle out, so the kills land while replying
        return echo(request)

    llm.keep_requests = False
    llm.default = slow_echo
    tg.send_delay = 0.03  # each send is in flight for a while: kills catch some of them
    chats = [1000 + i for i in range(CHATS)]
    section = {
        "enabled": True,
        "token_env": "TEST_TG_TOKEN",
        "api_base": tg.api_base,
        "poll_timeout": 1,
        "allow_from": [str(c) for c in chats],
    }
    cfg = write_config(tmp_path, llm, {"channels.telegram": section})
    db_path = tmp_path / "state" / "chela.sqlite3"
    log_path = tmp_path / "daemon.log"
    for k in range(PER_CHAT):
        for c in chats:
            tg.inject_message(c, f"c{c}-m{k}", from_id=c)

    in_flight_at_kill: list[int] = []
    proc = start(cfg, log_path)
    try:
        for threshold in KILL_AT:
            await tg.wait_for(lambda t=threshold: len(tg.sent) >= t, timeout=60)
            kill9(proc)
            in_flight_at_kill.append(in_flight(db_path))
            proc = start(cfg, log_path)
        await tg.wait_for(lambda: len({s.text for s in tg.sent}) >= CHATS * PER_CHAT, timeout=60)
        # anything sent twice would be sent by now: every update confirmed, nothing left to
        # handle or to send in the database
        await eventually(lambda: tg_taken(tg)() and store_idle(db_path), timeout=60)
    finally:
        rc = stop(proc)
    result = check_replies([(s.chat_id, s.visible_text) for s in tg.sent], chats, PER_CHAT)
    print(
        f"\ncrash test: {CHATS * PER_CHAT} messages, {len(KILL_AT)} kills, "
        f"in flight at each kill {in_flight_at_kill}, lost {len(result['lost'])}, "
        f"duplicates {result['duplicates']}"
    )
    assert result["lost"] == []
    assert result["duplicates"] <= sum(in_flight_at_kill)
    assert result["out_of_order"] == []
    assert len(in_flight_at_kill) == 3
    assert rc == 0


# -------------------------------------------------------------------------------- Discord
DC_TOKEN = "discord-test-token"
DC_BOT = 900000000000000001
USERS = [4240 + i for i in range(5)]
DC_PER_USER = 6


@pytest.fixture
async def dc():
    f = FakeDiscord(bot_id=DC_BOT, bot_name="chela", token=DC_TOKEN)
    await f.start()
    yield f
    await f.stop()


async def test_discord_sends_in_flight_at_a_kill_are_not_duplicated(tmp_path, llm, dc):
    llm.default = echo
    dc.send_delay = 0.5  # Discord has created the message; the daemon has not heard back
    section = {
        "enabled": True,
        "token_env": "TEST_DC_TOKEN",
        "api_base": dc.api_base,
        "gateway_url": dc.gateway_url,
        "allow_from": [str(u) for u in USERS],
    }
    cfg = write_config(tmp_path, llm, {"channels.discord": section})
    db_path = tmp_path / "state" / "chela.sqlite3"
    dms = {u: dc.add_dm_channel(u, f"user{u}") for u in USERS}
    proc = start(cfg, tmp_path / "daemon.log")
    try:
        await dc.wait_for_clients(1, timeout=60)
        for k in range(DC_PER_USER):
            for u in USERS:
                await dc.inject_message(dms[u], f"c{u}-m{k}", author_id=u, username=f"user{u}")
        await dc.wait_for_sent(8, timeout=60)
        kill9(proc)  # several sends are in flight: created at Discord, not marked sent
        flying = in_flight(db_path)
        dc.send_delay = 0.0
        proc = start(cfg, tmp_path / "daemon.log")
        await eventually(lambda: len(dc.sent) >= len(USERS) * DC_PER_USER, timeout=60)
        await eventually(lambda: store_idle(db_path), timeout=60)  # nothing left to send
    finally:
        rc = stop(proc)
    by_channel = {v: k for k, v in dms.items()}
    sent = [(by_channel[m["channel_id"]], m["content"]) for m in dc.sent]
    result = check_replies(sent, USERS, DC_PER_USER)
    assert flying >= 1  # the kill did land on sends in flight
    # those Discord had created already came back to the same nonce...
    assert 1 <= dc.nonce_hits <= flying
    assert result == {"lost": [], "duplicates": 0, "out_of_order": []}  # ...and not twice
    assert rc == 0


async def eventually(predicate, timeout: float) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        assert loop.time() < deadline, "condition not met in time"
        await asyncio.sleep(0.05)


# ----------------------------------------------------- heartbeat, cron, the message tool
PROACTIVE = """
import asyncio, os, signal, sys
from bot.config import load_config
from bot.app.daemon import Daemon

async def main():
    d = Daemon(load_config(sys.argv[1]), scheduler=False)
    await d.start()
    hb = await d.scheduled.heartbeat()
    cron = await d.scheduled.run_cron("plants", "remind me to water the plants", "telegram", "42")
    tool = await d.agent.send_message("telegram", "42", "a note from the message tool")
    print(hb.status, cron.status, tool.split(":")[0], flush=True)
    os.kill(os.getpid(), signal.SIGKILL)  # stored, not sent: the platform is down

asyncio.run(main())
"""


async def test_heartbeat_cron_and_message_tool_sends_survive_a_kill_before_sending(
    tmp_path, llm, tg
):
    def answer(request: dict):
        body = json.dumps(request["messages"])
        if "HEARTBEAT" in body and "plants" not in body:
            return text("Heads up: the backup failed last night.")
        return text("Time to water the plants.")

    llm.default = answer
    section = {
        "enabled": True,
        "token_env": "TEST_TG_TOKEN",
        "api_base": tg.api_base,
        "poll_timeout": 1,
        "allow_from": ["42"],
    }
    cfg = write_config(
        tmp_path,
        llm,
        {"channels.telegram": section},
    )
    text_ = cfg.read_text().replace('every = "0m"', 'every = "0m"\ntarget = "telegram"\nto = "42"')
    cfg.write_text(text_)
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "HEARTBEAT.md").write_text("- check the backup log\n")
    tg.fail_next("sendMessage", 502, times=10_000)  # Telegram is down
    env = {**os.environ, "TEST_TG_TOKEN": TG_TOKEN, "PYTHONPATH": str(ROOT)}
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        PROACTIVE,
        str(cfg),
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    out, _ = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == -signal.SIGKILL
    assert out.decode().split() == ["queued", "queued", "queued"]
    db = sqlite3.connect(tmp_path / "state" / "chela.sqlite3")
    rows = db.execute("SELECT kind, state FROM outbox ORDER BY id").fetchall()
    db.close()
    # stored before sending; a retry may have been in flight ('sending') at the kill
    assert [k for k, _ in rows] == ["heartbeat", "cron", "message"]
    assert {s for _, s in rows} <= {"queued", "sending"}
    assert tg.sent == []

    tg.clear_failures()  # the platform is back; the daemon starts again
    daemon = start(cfg, tmp_path / "daemon.log")
    try:
        await tg.wait_for_sent(3, timeout=60)
        db_path = tmp_path / "state" / "chela.sqlite3"
        await eventually(lambda: tg_taken(tg)() and store_idle(db_path), timeout=60)
    finally:
        rc = stop(daemon)
    assert [s.visible_text for s in tg.sent] == [
        "Heads up: the backup failed last night.",
        "Time to water the plants.",
        "a note from the message tool",
    ]
    assert all(s.chat_id == 42 for s in tg.sent)
    assert rc == 0
