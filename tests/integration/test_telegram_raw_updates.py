"""getUpdates through LeanBot.raw_updates answers and fails exactly as through PTB's
Bot.do_api_request("getUpdates", ...), which the poll used before, without its warning on
every poll."""

from __future__ import annotations

import warnings
from typing import Any

import pytest

from channels.telegram.request import AiohttpRequest
from channels.telegram.send import LeanBot
from tests.fakes.telegram import FakeTelegram

DATA = {"timeout": 0, "allowed_updates": ["message"], "limit": 5}


def _bot(tg: FakeTelegram) -> LeanBot:
    return LeanBot(
        tg.token,
        base_url=f"{tg.api_base}/bot",
        base_file_url=f"{tg.api_base}/file/bot",
        request=AiohttpRequest(),
        get_updates_request=AiohttpRequest(),
    )


async def _outcome(call: Any) -> tuple[str, str, Any]:
    try:
        result = await call
    except Exception as exc:
        return type(exc).__name__, str(exc), getattr(exc, "retry_after", None)
    return "ok", "", result


async def _both(bot: LeanBot, tg: FakeTelegram, status: int | None) -> list[tuple]:
    out = []
    for raw in (True, False):
        if status is not None:
            tg.fail_next("getUpdates", status)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            call = (
                bot.raw_updates(dict(DATA), read_timeout=5.0)
                if raw
                else bot.do_api_request("getUpdates", dict(DATA), read_timeout=5.0)
            )
            out.append(await _outcome(call))
    return out


@pytest.mark.parametrize("status", [None, 401, 404, 409, 429, 400, 502])
@pytest.mark.parametrize("initialized", [True, False])
async def test_raw_updates_answers_and_fails_as_do_api_request(status, initialized) -> None:
    tg = FakeTelegram(token="123:SECRET", bot_username="chela_bot")
    await tg.start()
    bot = _bot(tg)
    try:
        if initialized:
            await bot.initialize()
        else:
            await bot.request.initialize()
            await bot._request[0].initialize()
        tg.inject_message(42, "hello", from_id=42)
        raw, ptb = await _both(bot, tg, status)
        assert raw == ptb
        if status is None:
            assert raw[2] and raw[2][0]["message"]["text"] == "hello"
    finally:
        await bot.shutdown()
        await bot.request.shutdown()
        await bot._request[0].shutdown()
        await tg.stop()


async def test_raw_updates_does_not_warn_on_every_poll() -> None:
    tg = FakeTelegram(token="123:SECRET", bot_username="chela_bot")
    await tg.start()
    bot = _bot(tg)
    try:
        await bot.initialize()
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert await bot.raw_updates(dict(DATA), read_timeout=5.0) == []
            with pytest.raises(Warning, match="Bot.getUpdates"):
                await bot.do_api_request("getUpdates", dict(DATA), read_timeout=5.0)
    finally:
        await bot.shutdown()
        await tg.stop()
