"""Repro (not a test): cancelling in-flight python-telegram-bot requests, httpx vs aiohttp.

    cd /work/main && python bench/typing_cancel_leak.py

``Router._turn`` used to cancel its ``_keep_typing`` task when a turn ended; if a
sendChatAction was in flight at that moment, PTB's stock ``HTTPXRequest`` never released
the cancelled request's slot in its connection pool.  After enough of them every call
failed with "Pool timeout".  The conversation now shields that call, and the adapter now uses
``channels.telegram.request.AiohttpRequest``; this script shows both request classes on
their own: it cancels 3,000 sendChatAction calls after 0-3 ms each against FakeTelegram,
then tries one sendMessage.
"""

from __future__ import annotations

import asyncio
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from telegram import Bot
from telegram.request import HTTPXRequest

from channels.telegram.request import AiohttpRequest
from tests.fakes.telegram import FakeTelegram


def _busy(req) -> str:
    """Slots held, for inspection only (private attributes of each library)."""
    if isinstance(req, HTTPXRequest):
        pool = req._client._transport._pool
        return f"{len(pool.connections)} connections, {len(pool._requests)} stuck requests"
    connector = req._session.connector
    return f"{len(connector._acquired)} connections acquired"


async def run(name: str, req) -> None:
    tg = FakeTelegram(token="123:ABC")
    await tg.start()
    bot = Bot("123:ABC", base_url=f"{tg.api_base}/bot", request=req)
    await bot.initialize()
    print(f"-- {name}")
    for i in range(3001):
        t = asyncio.create_task(bot.send_chat_action(chat_id=1, action="typing"))
        await asyncio.sleep(random.random() * 0.003)
        t.cancel()
        await asyncio.gather(t, return_exceptions=True)
        if i % 1000 == 0:
            print(f"{i:>6} cancelled: {_busy(req)}")
    try:
        await bot.send_message(chat_id=1, text="after")
        print("sendMessage afterwards: OK")
    except Exception as e:
        print(f"sendMessage afterwards: FAILED: {e}")
    await bot.shutdown()
    await tg.stop()


async def main() -> None:
    await run(
        "HTTPXRequest (PTB's default)",
        HTTPXRequest(connection_pool_size=8, pool_timeout=2.0, read_timeout=5, write_timeout=5),
    )
    await run(
        "AiohttpRequest (the adapter's)",
        AiohttpRequest(connection_pool_size=8, pool_timeout=2.0, read_timeout=5, write_timeout=5),
    )


if __name__ == "__main__":
    asyncio.run(main())
