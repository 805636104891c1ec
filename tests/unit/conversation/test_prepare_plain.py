"""A message without attachments (most of them) goes straight to its user turn: the text is
the metadata block and the message, exactly what format_user_turn writes, with the group's
pending messages and the mention flag; nothing is fetched or read, no model port is asked.
Its twin: a message with an attachment still has it fetched and noted."""

from __future__ import annotations

import time

from bot.agent.context import format_user_turn, zone
from bot.conversation.prepare import Prepare
from bot.conversation.types import UserTurn
from channels.base import InboundMessage, MediaItem
from tests.unit.conversation.test_prepare_media import OWNER, FetchingChannel, setup


def _msg(**kw) -> InboundMessage:
    base = dict(
        channel="telegram",
        chat_id="-5",
        sender_id="42",
        sender_name="Alice",
        text="hello there",
        message_id="9",
        timestamp=time.time(),
    )
    return InboundMessage(**{**base, **kw})  # type: ignore[arg-type]


async def test_a_plain_message_is_its_formatted_text(tmp_path):
    _, _, prep = setup(tmp_path)
    prep.agent.gate = None  # no model port: a plain message never needs one
    for msg, pending, mentioned in (
        (_msg(), [], None),
        (_msg(chat_type="group", chat_title="Team"), [{"sender": "Bob", "text": "hi"}], True),
        (_msg(chat_type="group", text=""), [], False),
    ):
        got = await prep.user_turn(msg, "k", OWNER, pending=pending, was_mentioned=mentioned)
        want = format_user_turn(
            msg, tz=zone(prep.cfg), pending=pending, notes=[], was_mentioned=mentioned
        )
        assert got == UserTurn(want)


async def test_an_attachment_is_still_fetched_and_noted(tmp_path):
    _, _, prep = setup(tmp_path)
    msg = _msg(attachments=[MediaItem(kind="document", target="", ref="big", name="huge.pdf")])
    got = await prep.user_turn(msg, "k", OWNER, pending=[], was_mentioned=None)
    assert "attachment not downloaded: huge.pdf (document) is larger than" in got.text


def test_the_setup_is_the_media_tests(tmp_path):
    _, _, prep = setup(tmp_path)
    assert isinstance(prep, Prepare) and isinstance(prep.channels["telegram"], FetchingChannel)
