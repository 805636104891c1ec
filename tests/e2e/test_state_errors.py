"""An unusable state dir or database stops `chela run` with one clear line, never a traceback (issue 11)."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from bot.agent.tools.sandbox import probe
from bot.store import Store, StoreError
from tests.e2e import config_file


def run_chela(cfg_path, timeout=30):
    return subprocess.run(
        [sys.executable, "-m", "bot", "run", "--config", str(cfg_path)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_a_file_that_is_not_a_database_is_named(tmp_path, llm):
    state = tmp_path / "state"
    state.mkdir()
    (state / "chela.sqlite3").write_bytes(b"this is not sqlite" * 100)
    r = run_chela(config_file(tmp_path / "c.toml", llm, workspace=tmp_path / "ws", state_dir=state))
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert (
        f"{state / 'chela.sqlite3'} is not a Chela database" in r.stderr
        and "agent.state_dir" in r.stderr
    )


def test_a_state_dir_that_is_a_file_is_named(tmp_path, llm):
    (tmp_path / "state").write_text("oops, a file")
    r = run_chela(
        config_file(
            tmp_path / "c.toml", llm, workspace=tmp_path / "ws", state_dir=tmp_path / "state"
        )
    )
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert str(tmp_path / "state") in r.stderr and "agent.state_dir" in r.stderr


def test_a_read_only_state_dir_is_named(tmp_path):
    if not probe().ok or shutil.which("bwrap") is None:
        pytest.skip("needs bubblewrap to make a read-only filesystem (root ignores file modes)")
    state = tmp_path / "state"
    code = (
        "from bot.store import Store, StoreError\n"
        f"try:\n    Store({str(state / 'chela.sqlite3')!r})\nexcept StoreError as e:\n    print(e)\n"
    )
    r = subprocess.run(
        [
            "bwrap",
            "--ro-bind",
            "/",
            "/",
            "--dev",
            "/dev",
            "--proc",
            "/proc",
            "--",
            sys.executable,
            "-c",
            code,
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert (
        "Read-only file system" in r.stdout
        and str(state) in r.stdout
        and "agent.state_dir" in r.stdout
    )


def test_the_twin_a_good_state_dir_opens(tmp_path):
    s = Store(tmp_path / "state" / "chela.sqlite3")
    s.put("k", 1)
    assert s.get("k") == 1
    s.close()
    with pytest.raises(StoreError):
        Store(tmp_path / "state" / "chela.sqlite3" / "x")
