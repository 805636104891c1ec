"""``chela pairing approve`` from the command line (another process), then the friend writes
again before the daemon's next look at the approvals: the message that waited for the
approval is answered first, then the new one (fake Telegram → daemon → fake LLM).

The daemon's periodic look is pushed far out, so the order does not depend on when it runs:
the friend's next message is what makes the daemon act on the approval."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from bot.config import load_config
from tests.e2e import config_file, running, telegram_section
from tests.fakes.llm import text

ROOT = Path(__file__).resolve().parents[2]
OWNER, FRIEND = 42, 77


def to(tg, chat: int) -> list[str]:
    return [m.visible_text for m in tg.sent if m.chat_id == chat]


def approve_from_the_cli(path: Path, code: str) -> str:
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "bot",
            "pairing",
            "approve",
            "telegram",
            code,
            "--config",
            str(path),
        ],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    return r.stdout


async def test_the_waiting_message_is_answered_before_the_friends_next_one(
    tmp_path, llm, tg, monkeypatch
):
    monkeypatch.setattr("bot.app.daemon.PAIRING_POLL", 3600.0)  # the periodic look never comes
    path = config_file(
        tmp_path / "config.toml",
        llm,
        workspace=tmp_path / "ws",
        state_dir=tmp_path / "state",
        channels=telegram_section(tg),
    )
    llm.script(text("answer one"), text("answer two"))
    async with running(load_config(str(path))):
        tg.inject_message(FRIEND, "first: can you help me plan a trip?", from_id=FRIEND)
        said = await tg.wait_for(lambda: to(tg, FRIEND), timeout=15)
        code = said[0].split("Pairing code: ")[1][:8]
        assert str(FRIEND) in approve_from_the_cli(path, code)
        tg.inject_message(FRIEND, "second: also, what should I pack?", from_id=FRIEND)
        await tg.wait_for(lambda: len(to(tg, FRIEND)) >= 4, timeout=15)
    _, told, *answers = to(tg, FRIEND)
    assert "approved" in told
    assert answers == ["answer one", "answer two"]
    asked = [str([m for m in r["messages"] if m["role"] == "user"][-1]) for r in llm.requests]
    assert "first: can you help" in asked[0] and "second: also" in asked[1]


async def test_twin_the_periodic_look_answers_the_waiting_message_without_a_next_one(
    tmp_path, llm, tg, monkeypatch
):
    monkeypatch.setattr("bot.app.daemon.PAIRING_POLL", 0.05)
    path = config_file(
        tmp_path / "config.toml",
        llm,
        workspace=tmp_path / "ws",
        state_dir=tmp_path / "state",
        channels=telegram_section(tg),
    )
    llm.script(text("answer one"))
    async with running(load_config(str(path))):
        tg.inject_message(FRIEND, "first: can you help me plan a trip?", from_id=FRIEND)
        said = await tg.wait_for(lambda: to(tg, FRIEND), timeout=15)
        approve_from_the_cli(path, said[0].split("Pairing code: ")[1][:8])
        await tg.wait_for(lambda: len(to(tg, FRIEND)) >= 3, timeout=15)
    _, told, answer = to(tg, FRIEND)
    assert "approved" in told and answer == "answer one"
