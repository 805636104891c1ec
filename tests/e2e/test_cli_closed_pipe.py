"""``chela ... | head -1``: a reader that goes away before Chela writes, in an environment
without PYTHONUNBUFFERED (cron, systemd, a login shell), ends the command quietly: no
"Exception ignored ... BrokenPipeError" and not Python's exit status 120.

The reader is a real pipe whose read end is closed before the command starts, so the
command's output always meets a closed pipe (no timing involved)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

COMMANDS = [["--help"], ["check"], ["pairing", "list"]]


def _env(tmp_path: Path) -> dict[str, str]:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONPATH": str(ROOT)}
    return env  # no PYTHONUNBUFFERED: stdout is block-buffered into a pipe


def _config(tmp_path: Path) -> Path:
    cfg = tmp_path / "config.toml"
    cfg.write_text(
        f'[agent]\nworkspace = "{tmp_path / "ws"}"\nstate_dir = "{tmp_path / "state"}"\n'
        'model = "openai/gpt-4o-mini"\n'
    )
    return cfg


def _args(words: list[str], tmp_path: Path) -> list[str]:
    return words if words == ["--help"] else [*words, "--config", str(_config(tmp_path))]


@pytest.mark.parametrize("words", COMMANDS, ids=" ".join)
def test_a_closed_pipe_ends_the_command_quietly(tmp_path, words):
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader has gone before the command writes
    try:
        r = subprocess.run(
            [sys.executable, "-m", "bot", *_args(words, tmp_path)],
            stdout=write_end,
            stderr=subprocess.PIPE,
            env=_env(tmp_path),
            cwd=tmp_path,
            text=True,
            timeout=60,
        )
    finally:
        os.close(write_end)
    assert "BrokenPipeError" not in r.stderr and "Exception ignored" not in r.stderr, r.stderr
    assert r.returncode == 141, r.stderr


@pytest.mark.parametrize("words", COMMANDS, ids=" ".join)
def test_twin_a_reader_that_stays_gets_the_output_and_status_0(tmp_path, words):
    r = subprocess.run(
        [sys.executable, "-m", "bot", *_args(words, tmp_path)],
        capture_output=True,
        env=_env(tmp_path),
        cwd=tmp_path,
        text=True,
        timeout=60,
    )
    assert r.stdout.strip(), r.stderr
    assert "BrokenPipeError" not in r.stderr
    assert r.returncode == 0, r.stderr
