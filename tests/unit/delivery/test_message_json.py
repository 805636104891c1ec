"""message_json (issue 28 item 5) is dataclasses.asdict for the message dataclasses, faster:
the same dict, key order included, for every field kind they have (plain values, media
lists, an HTTP API call's nested ``api`` dict), and a copy that shares nothing mutable."""

from __future__ import annotations

import dataclasses
import json

from bot.delivery.outbox import message_json, out_from_json, out_json
from channels.base import InboundMessage, MediaItem, OutboundMessage


def _same(obj: object) -> None:
    want = dataclasses.asdict(obj)  # type: ignore[call-overload]
    got = message_json(obj)
    assert got == want
    assert list(got) == list(want)
    assert json.dumps(got) == json.dumps(want)  # the stored payload, byte for byte


def test_inbound_messages_as_asdict():
    _same(InboundMessage(channel="telegram", chat_id="42", sender_id="42", text="hi"))
    _same(
        InboundMessage(
            channel="signal",
            chat_id="g1",
            sender_id="+100",
            text="look",
            chat_type="group",
            thread_id="7",
            attachments=[MediaItem(kind="image", target="", ref="abc", size=12)],
            timestamp=1.5,
            reply_to_bot=True,
        )
    )


def test_outbound_messages_as_asdict_and_back():
    api = {"usage": {"prompt_tokens": 3}, "tool_calls": [{"id": "c1", "args": {"a": [1, 2]}}]}
    out = OutboundMessage(
        chat_id="42",
        text="**done**",
        media=[MediaItem(kind="file", target="/w/a.txt", name="a.txt", mime="text/plain")],
        api=api,
        edit_id="9",
    )
    _same(out)
    _same(OutboundMessage(chat_id="1"))
    assert out_from_json(out_json(out)) == out


def test_the_copy_shares_nothing_mutable():
    """Twin of asdict's deep copy: changing the message afterwards leaves the dict alone."""
    out = OutboundMessage(chat_id="1", media=[MediaItem(kind="image", target="u")], api={"k": [1]})
    d = out_json(out)
    out.api["k"].append(2)
    out.media.append(MediaItem(kind="file", target="v"))
    assert d["api"] == {"k": [1]} and d["media"] == [dataclasses.asdict(MediaItem("image", "u"))]
