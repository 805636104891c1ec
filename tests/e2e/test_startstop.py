"""Start and stop of the real process (issue 19): litellm's import begins before the config is
read and "ready" waits for it, so the first message after "ready" costs one model call; a
SIGTERM at any point ends the process cleanly without waiting for that import.  Speed is in
bench/startstop_bench.py; these tests check behaviour only (the timeouts are generous)."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys

from tests.e2e import config_file, telegram_section
from tests.fakes.llm import text
from tests.e2e.test_first_hour import env, eventually, start_daemon, wait_log

PRELOAD_SCRIPT = """
import asyncio
from bot.model import litellm_path

async def main():
    waiter = asyncio.ensure_future(litellm_path.litellm())
    await asyncio.sleep(0.05)
    waiter.cancel()  # e.g. a stop requested while "ready" waited for the import
    try:
        await waiter
    except asyncio.CancelledError:
        print("gave up")
    module = await litellm_path.litellm()
    print("imported", module.__name__)

asyncio.run(main())
"""


def test_a_waiter_that_gives_up_does_not_cancel_the_import():
    r = subprocess.run(
        [sys.executable, "-c", PRELOAD_SCRIPT],
        env=env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n")[:2] == ["gave up", "imported litellm"]


def _cfg(tmp_path, llm, tg):
    return config_file(
        tmp_path / "config.toml",
        llm,
        workspace=tmp_path / "ws",
        state_dir=tmp_path / "state",
        channels=telegram_section(tg),
    )


async def _exit_code(proc: subprocess.Popen, timeout: float = 30) -> int:
    await eventually(lambda: proc.poll() is not None, timeout=timeout)
    return proc.returncode


async def test_sigterm_while_litellm_imports_stops_cleanly_and_loses_nothing(tmp_path, llm, tg):
    cfg_path, log = _cfg(tmp_path, llm, tg), tmp_path / "daemon.log"
    llm.script(text("answered once"))
    proc = start_daemon(cfg_path, log)
    try:
        await wait_log(log, "channel telegram started")
        tg.inject_message(42, "sent while starting", from_id=42)
        proc.send_signal(signal.SIGTERM)
        assert await _exit_code(proc) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    out = log.read_text()
    assert "Traceback" not in out and out.rstrip().endswith("stopped"), out[-2000:]

    # answered exactly once: by the stopping daemon (a turn in progress finishes) or the next one
    log2 = tmp_path / "daemon2.log"
    proc = start_daemon(cfg_path, log2)
    try:
        sent = await tg.wait_for_sent(1, timeout=60)
        await wait_log(log2, "ready in", timeout=60)
        await asyncio.sleep(0.5)
        assert [m.visible_text for m in tg.sent] == ["answered once"]
        proc.send_signal(signal.SIGTERM)
        assert await _exit_code(proc) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    assert sent


async def test_twin_the_first_message_after_ready_is_answered_then_sigterm_exits(tmp_path, llm, tg):
    cfg_path, log = _cfg(tmp_path, llm, tg), tmp_path / "daemon.log"
    llm.script(text("hello at once"))
    proc = start_daemon(cfg_path, log)
    try:
        await wait_log(log, "ready in", timeout=60)
        tg.inject_message(42, "hi", from_id=42)
        sent = await tg.wait_for_sent(1, timeout=30)
        assert sent[0].visible_text == "hello at once"
        proc.send_signal(signal.SIGTERM)
        assert await _exit_code(proc) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    out = log.read_text()
    # litellm was imported before "ready": the turn did not wait for it
    assert out.index("ready in") < out.index("stopping")
    assert out.rstrip().endswith("stopped") and "Traceback" not in out
