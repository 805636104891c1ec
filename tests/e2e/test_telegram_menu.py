"""The chat's command menu (setMyCommands) is published after the first getUpdates, so the
first poll never waits for the command table (which imports most of the core); a menu that
cannot be built or set costs only the menu: the bot still answers."""

from __future__ import annotations

import logging

from bot.conversation.commands import menu
from channels.telegram import TelegramChannel
from tests.e2e import TG_TOKEN, make_config, running, telegram_section
from tests.fakes.llm import text


def names(tg) -> list[str]:
    return [m for m, _ in tg.calls]


async def test_the_menu_follows_the_first_poll_and_lists_every_command(tmp_path, llm, tg):
    llm.script(text("hello"))
    cfg = make_config(tmp_path, llm, channels=telegram_section(tg))
    async with running(cfg):
        await tg.wait_for_call("setMyCommands", timeout=15)
        tg.inject_message(42, "hi", from_id=42)
        await tg.wait_for_sent(1, timeout=15)
    calls = names(tg)
    assert calls.index("getUpdates") < calls.index("setMyCommands")  # was the other way round
    assert [(c["command"], c["description"]) for c in tg.commands] == menu()


async def test_a_menu_that_cannot_be_built_costs_only_the_menu(tg, caplog):
    def broken() -> list[tuple[str, str]]:
        raise RuntimeError("no table")

    got = []

    async def sink(msg) -> None:
        got.append(msg.text)

    ch = TelegramChannel(token=TG_TOKEN, api_base=tg.api_base, poll_timeout=1, commands=broken)
    with caplog.at_level(logging.ERROR, logger="chela.channels.telegram"):
        await ch.start(sink)
        try:
            tg.inject_message(42, "still here", from_id=42)
            await tg.wait_for(lambda: got, timeout=15)
        finally:
            await ch.stop()
    assert got == ["still here"] and tg.calls_of("setMyCommands") == []
    assert "could not set the command menu" in caplog.text


async def test_a_menu_given_as_a_list_is_published_as_given(tg):
    ch = TelegramChannel(
        token=TG_TOKEN, api_base=tg.api_base, poll_timeout=1, commands=[("help", "this list")]
    )
    await ch.start(lambda msg: None)
    try:
        await tg.wait_for_call("setMyCommands", timeout=15)
    finally:
        await ch.stop()
    assert [(c["command"], c["description"]) for c in tg.commands] == [("help", "this list")]
