"""The daemon's channel supervisor, end to end: a channel that cannot start is retried
while the others serve; a channel whose connection dies for good after start is restarted."""

from __future__ import annotations

import logging

import aiohttp

from tests.e2e import eventually, make_config, running, telegram_section
from tests.fakes.discord import FakeDiscord
from tests.fakes.llm import text

DC_TOKEN = "discord-test-token"
ALICE = 4242


async def test_channel_failing_to_start_is_retried_while_others_serve(tmp_path, llm, tg, caplog):
    tg.fail_next("getMe", 502, times=2)  # Telegram is down for the first two attempts
    cfg = make_config(
        tmp_path,
        llm,
        channels={**telegram_section(tg), "http": {"enabled": True, "listen": "127.0.0.1:0"}},
    )
    llm.script(text("from http"), text("from telegram"))
    with caplog.at_level(logging.INFO, logger="chela.daemon"):
        async with running(cfg) as d:
            # HTTP serves while Telegram is still failing
            url = f"http://127.0.0.1:{d.channels['http'].bound_port}/v1/chat/completions"
            auth = {"Authorization": f"Bearer {cfg.http_token_path.read_text().strip()}"}
            async with (
                aiohttp.ClientSession() as s,
                s.post(
                    url, json={"messages": [{"role": "user", "content": "hi"}]}, headers=auth
                ) as r,
            ):
                assert (await r.json())["choices"][0]["message"]["content"] == "from http"
            assert not d.channels["telegram"].running
            # retried after 1 s and then 2 s: up on the third attempt
            await eventually(lambda: d.channels["telegram"].running, timeout=10)
            tg.inject_message(42, "hello", from_id=42)
            sent = await tg.wait_for_sent(1, timeout=15)
    assert sent[0].visible_text == "from telegram"
    failures = [r.getMessage() for r in caplog.records if "failed to start" in r.getMessage()]
    assert len(failures) == 2 and all(
        "channel telegram" in m and "retrying in" in m for m in failures
    )


async def test_discord_gateway_closed_for_good_after_ready_is_restarted(
    tmp_path, llm, monkeypatch, caplog
):
    dc = FakeDiscord(bot_name="chela", token=DC_TOKEN)
    await dc.start()
    monkeypatch.setenv("TEST_DC_TOKEN", DC_TOKEN)
    cfg = make_config(
        tmp_path,
        llm,
        channels={
            "discord": {
                "enabled": True,
                "token_env": "TEST_DC_TOKEN",
                "api_base": dc.api_base,
                "gateway_url": dc.gateway_url,
                "allow_from": [str(ALICE)],
            }
        },
    )
    llm.script(text("still here"))
    try:
        with caplog.at_level(logging.INFO, logger="chela.daemon"):
            async with running(cfg):
                await dc.wait_for_clients(1)
                assert len(dc.identifies) == 1
                # 4004 is a close discord.py does not reconnect from: its client gives up
                await dc.close_gateway(4004, b"Authentication failed.")
                await eventually(lambda: len(dc.identifies) == 2, timeout=10)  # a fresh login
                await dc.wait_for_clients(1)
                dm = dc.add_dm_channel(ALICE, "alice")
                await dc.inject_message(dm, "are you there?", author_id=ALICE, username="alice")
                sent = await dc.wait_for_sent(1, timeout=15)
    finally:
        await dc.stop()
    assert sent[0]["content"] == "still here"
    assert any("channel discord stopped unexpectedly" in r.getMessage() for r in caplog.records)
