"""One next heartbeat time (issue 37 #8): after a restart, ``chela status``'s header and its
jobs table name the same next run, the one the schedule keeps (counted from when the
heartbeat was first scheduled, not from the daemon's latest start).  The real CLI and
``chela run`` against the fake LLM."""

from __future__ import annotations

import re
import subprocess
import sys
import time

from tests.e2e import eventually
from tests.e2e.harness import config_file
from tests.e2e.test_first_hour import chela, env, stop

STAMP = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d")


async def run_once(cfg, tmp_path, n: int) -> None:
    """Start ``chela run``, wait until it is ready, stop it."""
    log = tmp_path / f"run{n}.log"
    proc = subprocess.Popen(
        [sys.executable, "-m", "bot", "run", "--config", str(cfg)],
        env=env(),
        stdout=subprocess.DEVNULL,
        stderr=log.open("w"),
    )
    try:
        await eventually(lambda: "ready in" in log.read_text(), timeout=60)
    finally:
        assert stop(proc) == 0, log.read_text()


def header_and_row(out: str) -> tuple[str, str]:
    header = next(line for line in out.splitlines() if line.startswith("heartbeat:"))
    row = next(line for line in out.splitlines() if re.match(r"heartbeat\s+every", line))
    return header, row


async def test_header_and_table_agree_after_a_restart(tmp_path, llm):
    cfg = config_file(
        tmp_path / "config.toml",
        llm,
        workspace=tmp_path / "ws",
        state_dir=tmp_path / "state",
        heartbeat={"every": "1h"},
    )
    await run_once(cfg, tmp_path, 1)  # the heartbeat is scheduled from here
    time.sleep(2.5)  # the restart is seconds later: a clock counting from it is off by them
    log = tmp_path / "run2.log"
    proc = subprocess.Popen(
        [sys.executable, "-m", "bot", "run", "--config", str(cfg)],
        env=env(),
        stdout=subprocess.DEVNULL,
        stderr=log.open("w"),
    )
    try:
        await eventually(lambda: "ready in" in log.read_text(), timeout=60)
        r = await chela("status", "--config", str(cfg))
    finally:
        stop(proc)
    assert r.returncode == 0, r.stderr
    header, row = header_and_row(r.stdout)
    assert "daemon: running" in r.stdout
    (in_header,) = STAMP.findall(header)
    (in_table,) = STAMP.findall(row)
    assert in_header == in_table, r.stdout
    # stopped, the header names the same time the table does (the schedule's, not a guess)
    r = await chela("status", "--config", str(cfg))
    header, row = header_and_row(r.stdout)
    assert "daemon: not running" in r.stdout
    assert STAMP.findall(header) == STAMP.findall(row) == [in_table], r.stdout
