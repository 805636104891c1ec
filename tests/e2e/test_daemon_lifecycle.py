"""The daemon's lifecycle (issue 24 item 5): components entered in order and left in reverse,
and channels that hang in stop() do not hold SIGTERM → exit past 10 s (they stop in parallel)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from bot.app.daemon import Daemon
from channels.base import Capabilities, Channel, OutboundMessage
from tests.e2e import config_file, make_config, running

ROOT = Path(__file__).resolve().parents[2]


class HangingChannel(Channel):
    """Starts at once, never closes on its own, and never returns from stop()."""

    capabilities = Capabilities()

    def __init__(self, name: str = "hang", *, hang: bool = True):
        self.name = name
        self.hang = hang
        self.stopped = False

    async def start(self, sink) -> None:
        self._closed = asyncio.Event()

    async def wait_closed(self) -> BaseException | None:
        await self._closed.wait()
        return None

    async def stop(self) -> None:
        if self.hang:
            await asyncio.Event().wait()
        self.stopped = True
        self._closed.set()

    async def send(self, msg: OutboundMessage) -> list[str]:
        return ["1"]


def four_hanging() -> dict[str, Channel]:
    return {f"hang{i}": HangingChannel(f"hang{i}") for i in range(4)}


async def test_four_channels_hanging_in_stop_do_not_hold_stop_past_ten_seconds(tmp_path, llm):
    d = Daemon(make_config(tmp_path, llm), channels=four_hanging(), scheduler=False)
    await d.start()
    t0 = time.monotonic()
    await d.stop()
    took = time.monotonic() - t0
    assert took <= 10.0, f"stop took {took:.1f}s with four channels hanging in stop()"
    assert took >= d.timeouts.channel_stop * 0.9  # they were waited for, up to their bound


async def test_channels_that_stop_do_stop_and_quickly(tmp_path, llm):
    chans = {f"ok{i}": HangingChannel(f"ok{i}", hang=False) for i in range(4)}
    d = Daemon(make_config(tmp_path, llm), channels=chans, scheduler=False)
    await d.start()
    t0 = time.monotonic()
    await d.stop()
    assert time.monotonic() - t0 < 2.0
    assert all(ch.stopped for ch in chans.values())  # type: ignore[attr-defined]


async def test_components_are_left_in_the_reverse_of_their_start_order(tmp_path, llm):
    async with running(
        make_config(tmp_path, llm), channels={"ok": HangingChannel("ok", hang=False)}
    ) as d:
        started = [e.removeprefix("start ") for e in d.lifecycle]
        assert started[:2] == ["store", "prompt cache"]
        assert started.index("channels") < started.index("outbox") < started.index("turns")
        assert started[-1] == "cron"
    stopped = [e.removeprefix("stop ") for e in d.lifecycle if e.startswith("stop ")]
    assert stopped == list(reversed(started))


async def test_components_exist_before_start(tmp_path, llm):
    d = Daemon(make_config(tmp_path, llm), channels={}, scheduler=False)
    parts = [d.store, d.lanes, d.outbox, d.agent, d.conversation, d.scheduled, d.cron]
    assert all(p is not None for p in parts)
    assert d.lifecycle == []  # built, not started
    d.store.close()


def lock_text(state: Path) -> str:
    try:
        return (state / "chela.pid").read_text(errors="replace")
    except FileNotFoundError:
        return ""


HANGING_DAEMON = """
import asyncio, sys
sys.path.insert(0, sys.argv[2])
from bot.config import load_config
from bot.app.daemon import Daemon
from tests.e2e.test_daemon_lifecycle import four_hanging

d = Daemon(load_config(sys.argv[1]), channels=four_hanging())
sys.exit(asyncio.run(d.run()))
"""


def test_sigterm_to_a_daemon_with_four_channels_hanging_in_stop_exits_within_ten_seconds(
    tmp_path, llm
):
    cfg = config_file(
        tmp_path / "config.toml", llm, workspace=tmp_path / "ws", state_dir=tmp_path / "state"
    )
    log = tmp_path / "daemon.log"
    with log.open("w") as out:
        p = subprocess.Popen(
            [sys.executable, "-c", HANGING_DAEMON, str(cfg), str(ROOT)],
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        try:
            deadline = time.monotonic() + 60
            while '"ready": true' not in lock_text(tmp_path / "state"):
                assert time.monotonic() < deadline, log.read_text()
                assert p.poll() is None, log.read_text()
                time.sleep(0.1)
            t0 = time.monotonic()
            p.send_signal(signal.SIGTERM)
            rc = p.wait(timeout=30)
            took = time.monotonic() - t0
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert rc == 0, log.read_text()
    assert took <= 10.0, f"SIGTERM → exit took {took:.1f}s\n{log.read_text()}"
