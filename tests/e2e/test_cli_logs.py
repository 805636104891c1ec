"""`chela run` writes <state_dir>/logs/chela.log beside stderr; `chela logs` reads it,
filtered by --level, and -f follows it."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from bot.cli import main
from tests.e2e import config_file, eventually
from tests.e2e.test_first_hour import env, stop

LOG = "\n".join(
    [
        "2026-01-01 10:00:00,000 INFO chela.daemon: ready in 12 ms",
        "2026-01-01 10:00:01,000 WARNING chela.media: model x is not known to see images",
        "2026-01-01 10:00:02,000 ERROR chela.conversation: turn failed",
        "Traceback (most recent call last):",
        '  File "x.py", line 1',
        "2026-01-01 10:00:03,000 DEBUG chela.agent: detail",
    ]
)


def _cfg(tmp_path: Path, llm) -> Path:
    return config_file(
        tmp_path / "c.toml", llm, workspace=tmp_path / "ws", state_dir=tmp_path / "state"
    )


def test_logs_filters_by_level_keeping_a_traceback_with_its_line(tmp_path, llm, capsys):
    cfg = _cfg(tmp_path, llm)
    (tmp_path / "state" / "logs").mkdir(parents=True)
    (tmp_path / "state" / "logs" / "chela.log").write_text(LOG + "\n")
    assert main(["logs", "--config", str(cfg), "--level", "warning"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == LOG.splitlines()[1:5]
    assert main(["logs", "--config", str(cfg)]) == 0
    assert capsys.readouterr().out.splitlines() == LOG.splitlines()


def test_logs_without_a_log_says_where_it_would_be(tmp_path, llm, capsys):
    assert main(["logs", "--config", str(_cfg(tmp_path, llm))]) == 1
    assert "logs/chela.log" in capsys.readouterr().err


async def test_run_writes_the_log_file_and_logs_follows_it(tmp_path, llm):
    cfg = _cfg(tmp_path, llm)
    err = tmp_path / "stderr.log"
    proc = subprocess.Popen(
        [sys.executable, "-m", "bot", "run", "--config", str(cfg)],
        env=env(),
        stdout=subprocess.DEVNULL,
        stderr=err.open("w"),
    )
    log = tmp_path / "state" / "logs" / "chela.log"
    follower = None
    try:
        await eventually(lambda: log.exists() and "ready in" in log.read_text(), timeout=60)
        # stderr as well (its handler writes the line just after the file's)
        await eventually(lambda: "ready in" in err.read_text(), timeout=10)
        assert (os.stat(log).st_mode & 0o077) == 0
        follower = subprocess.Popen(
            [sys.executable, "-m", "bot", "logs", "-f", "--config", str(cfg)],
            env=env(),
            stdout=subprocess.PIPE,
            text=True,
        )
        time.sleep(0.5)
    finally:
        stop(proc)
    try:
        await eventually(lambda: "stopped" in log.read_text(), timeout=30)
        time.sleep(1)
    finally:
        assert follower is not None
        follower.terminate()
        out = follower.communicate(timeout=10)[0]
    assert "ready in" in out and "stopped" in out  # the line written after -f started
