"""``chela chat`` offers the chat's commands (SPEC §17, issue 26 item 6): /model, /think,
/stop, /pair (and /cron once it is a row of the table) are answered by the core in the
terminal as in any owner chat, without a model call; the next message follows /model and
/think.  Through the real CLI in pipe mode (one message per line) and the fake LLM."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

from bot.conversation import pairing_requests as pairing
from bot.conversation.commands import COMMANDS
from bot.store import Store
from tests.e2e import config_file
from tests.fakes.llm import text

ROOT = Path(__file__).resolve().parents[2]


async def chat_lines(cfg: Path, lines: list[str]) -> subprocess.CompletedProcess:
    return await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "bot", "chat", "--config", str(cfg)],
        input="".join(f"{line}\n" for line in lines),
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=90,
    )


async def test_the_terminal_chat_answers_the_control_commands(tmp_path, llm):
    cfg = config_file(
        tmp_path / "config.toml", llm, workspace=tmp_path / "ws", state_dir=tmp_path / "state"
    )
    with cfg.open("a") as f:
        f.write('[agent.models]\nfast = "openai/fast-model"\n')
    store = Store(tmp_path / "state" / "chela.sqlite3")
    code = pairing.request(store, "telegram", "77", "Eve", "hello?").code
    store.close()
    llm.script(text("fast and deep"))
    lines = [
        "/model fast",
        "/think high",
        "/stop",
        "/pair",
        f"/pair approve {code}",
        "/status",
        "hello",
    ]
    if "cron" in COMMANDS:
        lines.insert(0, "/cron")
    r = await chat_lines(cfg, lines)
    out = r.stdout
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Unknown command" not in out
    assert "Now using openai/fast-model." in out
    assert "Thinking set to high." in out
    assert "Nothing is running right now." in out
    assert f"code {code}" in out and "id 77" in out  # /pair lists the request
    assert f"Approved {code}" in out
    assert "Model: openai/fast-model\nThinking: high" in out
    assert out.rstrip().endswith("fast and deep")
    assert [(q["model"], q.get("reasoning_effort")) for q in llm.requests] == [
        ("fast-model", "high")
    ]
    store = Store(tmp_path / "state" / "chela.sqlite3")
    try:
        assert store.is_approved("telegram", "77")
    finally:
        store.close()
