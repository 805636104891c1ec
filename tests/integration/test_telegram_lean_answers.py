"""The Telegram sender reads only ``message_id`` from the answers of its own calls, so it
does not have PTB build a ``Message`` for each (issue 28 item 5: that cost as much CPU as
the HTTP call); the requests themselves still go through PTB (bench/telegram_wire.py shows
the same bytes), and the bot's other calls still answer typed objects."""

from __future__ import annotations

from telegram import Message

from channels.base import OutboundMessage
from channels.telegram import TelegramChannel
from tests.fakes.telegram import FakeTelegram


async def test_sends_build_no_message_objects(tmp_path, monkeypatch):
    tg = FakeTelegram(token="123:SECRET", bot_username="chela_bot")
    await tg.start()
    ch = TelegramChannel(token=tg.token, api_base=tg.api_base, media_dir=tmp_path / "media")
    try:
        await ch.open_for_sending()
        built: list[object] = []
        real = Message.de_json.__func__  # type: ignore[attr-defined]
        monkeypatch.setattr(
            Message,
            "de_json",
            classmethod(lambda cls, d, b=None: built.append(d) or real(cls, d, b)),
        )
        ids = await ch.send(OutboundMessage(chat_id="42", text="x" * 5000 + "\n\n" + "**y**"))
        preview = await ch.send_preview("42", "thinking")
        ids += await ch.send(OutboundMessage(chat_id="42", text="done", edit_id=preview))
        await ch.typing("42")
        assert built == []
        assert len(ids) == 3 and ids[2] == preview
        assert [s.message_id for s in tg.sent][:2] == [int(i) for i in ids[:2]]
    finally:
        await ch.stop()
        await tg.stop()


async def test_the_bots_other_calls_still_answer_typed_objects(tmp_path):
    """Twin: outside the sender's calls the bot is PTB's own (get_me, send_message)."""
    tg = FakeTelegram(token="123:SECRET", bot_username="chela_bot")
    await tg.start()
    ch = TelegramChannel(token=tg.token, api_base=tg.api_base, media_dir=tmp_path / "media")
    try:
        await ch.open_for_sending()
        bot = ch._sender.require_bot()
        me = await bot.get_me()
        assert me.username == "chela_bot"
        sent = await bot.send_message(chat_id=42, text="hi")
        assert isinstance(sent, Message) and sent.text == "hi"
    finally:
        await ch.stop()
        await tg.stop()
