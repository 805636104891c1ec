"""A real full file system as the state dir: a 2 MB tmpfs filled to the last byte refuses
writes with ENOSPC (SQLite: "database or disk is full").  test_store_full_disk.py uses the
database's page limit instead; this is the disk itself.  The daemon survives, the log names the
full disk and the state dir once, the owner gets one notice for the episode, and once room is
back the waiting messages are answered in order (the twin)."""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
from pathlib import Path

import pytest

from tests.e2e import eventually, running
from tests.e2e.test_outbox import cfg_for, echo, replies


def lines(caplog, text: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if text in r.getMessage()]


def notices(d, name: str) -> list[dict]:
    return [n.data for n in d.notices.since(None) if n.name == name]


@contextlib.contextmanager
def small_tmpfs(where: Path, size: str = "2m"):
    """A file system of ``size`` mounted at ``where`` (we run as root in CI); skips the test
    when mounting is not permitted here."""
    where.mkdir(parents=True, exist_ok=True)
    try:
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(where)],
            capture_output=True,
            text=True,
            check=False,
        )
    except FileNotFoundError:
        pytest.skip("no mount command here: cannot make a small file system for the state dir")
    if done.returncode != 0:
        pytest.skip(f"mounting a {size} tmpfs is not permitted here: {done.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def fill(where: Path) -> Path:
    """Write a file until the file system refuses (ENOSPC); delete it to free the space."""
    filler = where / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        for block in (1 << 16, 512):  # big blocks, then the last crumbs
            with contextlib.suppress(OSError):
                while True:
                    os.write(fd, b"\0" * block)
    finally:
        os.close(fd)
    return filler


async def test_a_full_file_system_is_named_once_survived_and_caught_up(tmp_path, llm, tg, caplog):
    llm.default = echo
    caplog.set_level(logging.DEBUG, logger="chela")
    cfg = cfg_for(tmp_path, llm, tg)
    state = Path(cfg.agent.state_dir)
    with small_tmpfs(state):
        async with running(cfg) as d:
            tg.inject_message(42, "c42-m1", from_id=42)
            await tg.wait_for_sent(1, timeout=30)
            filler = fill(state)
            for k in (2, 3, 4):
                tg.inject_message(42, f"c42-m{k}" + " pad" * 300, from_id=42)
            await eventually(lambda: lines(caplog, "disk full: "), timeout=30)
            # the writes keep being retried meanwhile: still one line, one notice
            tries = len(lines(caplog, "state database still not writable"))
            await eventually(
                lambda: len(lines(caplog, "state database still not writable")) >= tries + 2,
                timeout=30,
            )
            [said] = lines(caplog, "disk full: ")
            assert str(state) in said
            assert len(notices(d, "storage.full")) == 1
            assert notices(d, "storage.full")[0]["where"] == str(state)
            assert replies(tg, 42) == ["re c42-m1"]  # nothing answered, nothing dropped
            filler.unlink()  # room again
            await tg.wait_for_sent(4, timeout=90)
            assert replies(tg, 42) == ["re c42-m1", "re c42-m2", "re c42-m3", "re c42-m4"]
            await eventually(lambda: lines(caplog, "disk space is back"), timeout=30)
            assert len(notices(d, "storage.ok")) == 1
            tg.inject_message(42, "c42-m5", from_id=42)  # and life goes on
            await tg.wait_for_sent(5, timeout=30)
    assert len(lines(caplog, "disk full: ")) == 1
    assert not lines(caplog, "pairing approvals check failed")  # no traceback a second


async def test_with_room_on_the_small_file_system_nothing_is_said_about_space(
    tmp_path, llm, tg, caplog
):
    llm.default = echo
    caplog.set_level(logging.DEBUG, logger="chela")
    cfg = cfg_for(tmp_path, llm, tg)
    with small_tmpfs(Path(cfg.agent.state_dir)):
        async with running(cfg) as d:
            for k in (1, 2):
                tg.inject_message(42, f"c42-m{k}", from_id=42)
            await tg.wait_for_sent(2, timeout=30)
            assert replies(tg, 42) == ["re c42-m1", "re c42-m2"]
            assert not notices(d, "storage.full")
    assert not lines(caplog, "disk full") and not lines(caplog, "disk space is back")


async def test_chela_run_says_the_disk_is_full_on_stderr_once_and_catches_up(tmp_path, llm, tg):
    """``chela run`` keeps its log file in the state dir, so on a full disk the file cannot
    take the line; stderr (the journal under systemd) does, once, without a traceback per
    log record the file could not take."""
    from tests.e2e.test_crash import start, stop, write_config

    llm.default = echo
    section = {
        "enabled": True,
        "token_env": "TEST_TG_TOKEN",
        "api_base": tg.api_base,
        "poll_timeout": 1,
        "allow_from": ["42"],
    }
    cfg = write_config(tmp_path, llm, {"channels.telegram": section})
    state = tmp_path / "state"
    out = tmp_path / "daemon.out"
    with small_tmpfs(state):
        proc = start(cfg, out)
        try:
            tg.inject_message(42, "c42-m1", from_id=42)
            await tg.wait_for_sent(1, timeout=60)
            filler = fill(state)
            for k in (2, 3):
                tg.inject_message(42, f"c42-m{k}" + " pad" * 300, from_id=42)
            await eventually(lambda: "disk full: " in out.read_text(), timeout=60)
            filler.unlink()
            await tg.wait_for_sent(3, timeout=90)
        finally:
            rc = stop(proc)
    text = out.read_text()
    assert replies(tg, 42) == ["re c42-m1", "re c42-m2", "re c42-m3"]
    assert text.count("disk full: the state dir " + str(state)) == 1
    assert "Logging error" not in text and "Traceback" not in text
    assert rc == 0
