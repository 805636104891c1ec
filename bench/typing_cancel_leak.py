"""Repro (not a test): cancelling in-flight python-telegram-bot requests leaks httpx pool slots.

    cd /work/main && python bench/typing_cancel_leak.py

``Router._turn`` cancels its ``_keep_typing`` task when the turn ends; if a sendChatAction is
in flight at that moment, the cancelled request's slot in the 8-connection pool
(``TelegramChannel._make_bot``: ``HTTPXRequest(connection_pool_size=8)``) is never
released.  After enough of them, every call fails with "Pool timeout".  This script
cancels 3,000 sendChatAction calls after 0-3 ms each against FakeTelegram and prints the pool state.
"""

from __future__ import annotations

import asyncio
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from telegram import Bot  # noqa: E402
from telegram.request import HTTPXRequest  # noqa: E402

from tests.fakes.telegram import FakeTelegram  # noqa: E402


async def main() -> None:
    tg = FakeTelegram(token="123:ABC")
    await tg.start()
    req = HTTPXRequest(connection_pool_size=8, pool_timeout=2.0, read_timeout=5, write_timeout=5)
    bot = Bot("123:ABC", base_url=f"{tg.api_base}/bot", request=req)
    await bot.initialize()
    print(f"{'cancelled':>10}{'pool connections':>18}{'stuck pool requests':>21}")
    for i in range(3001):
        t = asyncio.create_task(bot.send_chat_action(chat_id=1, action="typing"))
        await asyncio.sleep(random.random() * 0.003)
        t.cancel()
        await asyncio.gather(t, return_exceptions=True)
        if i % 500 == 0:
            pool = req._client._transport._pool  # noqa: SLF001 - inspection only
            print(f"{i:>10}{len(pool.connections):>18}{len(pool._requests):>21}")
    try:
        await bot.send_message(chat_id=1, text="after")
        print("sendMessage afterwards: OK")
    except Exception as e:  # noqa: BLE001
        print(f"sendMessage afterwards: FAILED: {e}")
    await tg.stop()


if __name__ == "__main__":
    asyncio.run(main())
