"""The long poll against FakeTelegram: what a refused getUpdates does (backs off, says so in
the log, and picks up the waiting message once Telegram answers again), and that polling
emits no Python warning, even where warnings are errors."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

from channels.base import InboundMessage
from channels.telegram import TelegramChannel
from tests.fakes.telegram import FakeTelegram

ROOT = Path(__file__).resolve().parents[2]

# PTB's own RetryAfter constructor trips its retry_after deprecation warning; not ours to fix.
pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")


async def _first_message(ch: TelegramChannel, timeout: float = 8.0) -> InboundMessage:
    got: asyncio.Queue[InboundMessage] = asyncio.Queue()

    async def sink(msg: InboundMessage) -> None:
        await got.put(msg)

    await ch.start(sink)
    return await asyncio.wait_for(got.get(), timeout)


@pytest.mark.parametrize(
    ("status", "description"),
    [
        (401, "Unauthorized"),  # the token revoked while running
        (409, "Conflict: terminated by other getUpdates request"),  # a second instance
        (502, "Bad Gateway"),
    ],
)
async def test_a_refused_poll_backs_off_and_recovers(tmp_path, caplog, status, description):
    tg = FakeTelegram(token="777:SECRET", bot_username="chela_bot")
    await tg.start()
    ch = TelegramChannel(
        token=tg.token,
        api_base=tg.api_base,
        media_dir=tmp_path / "media",
        poll_timeout=1,
        backoff_initial=0.05,
        backoff_max=0.2,
    )
    try:
        tg.fail_next("getUpdates", status, description=description, times=2)
        tg.inject_message(42, "still there?", from_id=42)
        with caplog.at_level("WARNING", logger="chela.channels.telegram"):
            msg = await _first_message(ch)
        assert msg.text == "still there?"
        failed = [r.getMessage() for r in caplog.records if "getUpdates failed" in r.getMessage()]
        assert len(failed) == 2
        assert "SECRET" not in caplog.text
    finally:
        await ch.stop()
        await tg.stop()


async def test_a_rate_limited_poll_waits_as_told(tmp_path):
    tg = FakeTelegram(token="777:SECRET", bot_username="chela_bot")
    await tg.start()
    ch = TelegramChannel(token=tg.token, api_base=tg.api_base, media_dir=tmp_path / "m")
    try:
        tg.fail_next("getUpdates", 429, retry_after=1)
        tg.inject_message(42, "after the wait", from_id=42)
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        msg = await _first_message(ch)
        assert msg.text == "after the wait"
        assert loop.time() - t0 >= 0.9  # retry_after honoured, not the 1 s backoff start
    finally:
        await ch.stop()
        await tg.stop()


PROBE = """
import asyncio, sys
from channels.telegram import TelegramChannel
from tests.fakes.telegram import FakeTelegram

async def main():
    tg = FakeTelegram(token="777:SECRET", bot_username="chela_bot")
    await tg.start()
    ch = TelegramChannel(token=tg.token, api_base=tg.api_base, poll_timeout=1,
                         backoff_initial=5.0)
    got = asyncio.Queue()
    async def sink(msg):
        await got.put(msg)
    await ch.start(sink)
    for n in range(3):  # three polls: every one must pass with warnings as errors
        tg.inject_message(42, f"m{n}", from_id=42)
        print((await asyncio.wait_for(got.get(), 4)).text)
    await ch.stop()
    await tg.stop()

asyncio.run(main())
"""


def test_polling_raises_no_warning_even_when_warnings_are_errors():
    out = subprocess.run(
        [sys.executable, "-W", "error::UserWarning", "-c", PROBE],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["m0", "m1", "m2"]
