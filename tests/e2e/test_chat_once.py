"""``chela chat -m`` (issue 27 #8): the answer on stdout; a failed turn is said once, on
stderr, with the exit status 1 (it was printed three times: the apology as the answer, the
log warnings and the failure line)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

from tests.e2e import TG_TOKEN, config_file
from tests.fakes.llm import error, text

ROOT = Path(__file__).resolve().parents[2]


async def chat_m(cfg: Path, message: str) -> subprocess.CompletedProcess:
    return await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "bot", "chat", "--config", str(cfg), "-m", message],
        env={**os.environ, "PYTHONPATH": str(ROOT), "TEST_TG_TOKEN": TG_TOKEN},
        capture_output=True,
        text=True,
        timeout=60,
    )


async def test_a_failed_turn_is_reported_once_and_an_answer_is_printed_alone(tmp_path, llm):
    cfg = config_file(
        tmp_path / "config.toml", llm, workspace=tmp_path / "ws", state_dir=tmp_path / "state"
    )
    llm.script(error(401, {"error": {"message": "bad key"}}))
    r = await chat_m(cfg, "hello")
    both = r.stdout + r.stderr
    assert r.returncode == 1, both
    assert r.stdout == "", r.stdout  # no apology printed as if it were the answer
    assert both.count("401") == 1, both  # the failure, once
    assert r.stderr.startswith("chela: the turn failed:"), r.stderr
    assert "chat.log" in r.stderr  # where the details are
    # twin: an answer is the only output
    llm.script(text("hello back"))
    r = await chat_m(cfg, "hello")
    assert (r.returncode, r.stdout, r.stderr) == (0, "hello back\n", "")
