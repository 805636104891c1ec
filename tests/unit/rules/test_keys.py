"""Session keys (SPEC §4.1): one row per kind of conversation."""

from __future__ import annotations

import pytest

from bot.rules.keys import cron_key, main_key, session_key_for, subagent_key
from channels.base import InboundMessage


def _msg(chat_type: str = "direct", **kw) -> InboundMessage:
    base = {"channel": "telegram", "chat_id": "100", "sender_id": "7", "text": "hi"}
    return InboundMessage(chat_type=chat_type, **{**base, **kw})


@pytest.mark.parametrize(
    ("scope", "msg", "key"),
    [
        ("main", _msg(), "agent:a:main"),
        ("per-peer", _msg(), "agent:a:direct:7"),
        ("per-channel-peer", _msg(), "agent:a:telegram:direct:7"),
        ("nonsense", _msg(), "agent:a:main"),
        # a message that names its own peer session (an HTTP API user) is always per peer
        ("main", _msg(channel="http", peer_session=True), "agent:a:http:direct:7"),
        ("main", _msg("group"), "agent:a:telegram:group:100"),
        ("per-peer", _msg("group", group_kind="channel"), "agent:a:telegram:channel:100"),
        ("main", _msg("group", group_kind=""), "agent:a:telegram:group:100"),
        ("main", _msg("group", thread_id="9"), "agent:a:telegram:group:100:thread:9"),
    ],
)
def test_session_key_for(scope, msg, key):
    assert session_key_for("a", scope, msg) == key


def test_the_other_keys():
    assert main_key("a") == "agent:a:main"
    assert cron_key("a", "daily") == "agent:a:cron:daily"
    assert subagent_key("a", "u1") == "agent:a:subagent:u1"
