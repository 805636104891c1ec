"""``chela status`` while the daemon starts (issue 27 item 6): the channels already up are
listed at once, not only when start-up is over."""

from __future__ import annotations

import asyncio
import contextlib

from bot.app.daemon import Daemon
from bot.cli.status import status_text
from tests.e2e import eventually, make_config
from tests.e2e.test_daemon_lifecycle import HangingChannel


class SlowToStart(HangingChannel):
    """A channel whose start() does not return (a platform that does not answer yet)."""

    async def start(self, sink) -> None:
        await asyncio.Event().wait()


def status_when(cfg, present: str, absent: str = "\0") -> str | None:
    text = status_text(cfg)
    return text if present in text and absent not in text else None


@contextlib.asynccontextmanager
async def run_daemon(d: Daemon):
    task = asyncio.create_task(d.run())
    try:
        yield task
    finally:
        d.request_stop()
        assert await asyncio.wait_for(task, 30) == 0


async def test_status_lists_the_channels_up_while_another_still_starts(tmp_path, llm):
    cfg = make_config(tmp_path, llm)
    chans = {"fast": HangingChannel("fast", hang=False), "slow": SlowToStart("slow", hang=False)}
    d = Daemon(cfg, channels=chans, scheduler=False)  # start waits up to 15 s for "slow"
    async with run_daemon(d):
        text = await eventually(lambda: status_when(cfg, "channels: fast"), timeout=5)
        assert "daemon: running" in text
        assert "(starting)" in text  # start-up is not over: "slow" has not answered
        assert "slow" not in text


async def test_status_after_start_shows_every_channel_and_no_starting(tmp_path, llm):
    cfg = make_config(tmp_path, llm)
    chans = {"a": HangingChannel("a", hang=False), "b": HangingChannel("b", hang=False)}
    d = Daemon(cfg, channels=chans, scheduler=False)
    async with run_daemon(d):
        text = await eventually(lambda: status_when(cfg, "up since", "starting"), timeout=30)
        assert "channels: a, b" in text
    assert "daemon: not running" in status_text(cfg)
