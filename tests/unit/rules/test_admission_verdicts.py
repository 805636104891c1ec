"""Admission as a table (bot/rules/admission.py, SPEC §9): one row per way a verdict is reached, and
the session an HTTP API caller lands in.  (tests/unit/rules/test_admission.py holds the owner-id and
guest-directory rules next to the command parser.)"""

from __future__ import annotations

import pytest

from bot.rules.admission import admit, channel_policy, is_owner_sender, session_key
from bot.config import parse_config
from channels.base import InboundMessage

CFG = parse_config(
    {
        "owner": {"numbers": ["+15550001111"]},
        "channels": {
            "telegram": {
                "allow_from": ["42"],
                "dm_policy": "pairing",
                "groups": ["-100"],
                "owner_groups": ["-200"],
            },
            "discord": {"dm_policy": "open", "group_policy": "allowlist", "groups": ["*"]},
            "slack": {"dm_policy": "allowlist", "group_policy": "disabled"},
            "signal": {"dm_policy": "disabled", "group_policy": "open"},
        },
    }
)
APPROVED = {("telegram", "77"), ("slack", "U7")}


def msg(channel, sender, *, chat=None, group=False, bot=False, api=None) -> InboundMessage:
    return InboundMessage(
        channel=channel,
        chat_id=chat or sender,
        sender_id=sender,
        text="hi",
        chat_type="group" if group else "direct",
        sender_is_bot=bot,
        api=api or {},
    )


CASES = [
    # (message, action, trust, reason)
    (msg("telegram", "42", bot=True), "drop", None, "sent by a bot"),
    (msg("http", "c"), "serve", "owner", "local or token-authenticated channel"),
    (msg("signal", "+1", chat="g", group=True), "serve", "guest", "group"),
    (msg("slack", "U1", chat="C", group=True), "drop", None, "groups disabled"),
    (msg("telegram", "5", chat="-200", group=True), "serve", "owner", "owner group"),
    (msg("telegram", "42", chat="-300", group=True), "drop", None, "group not allowlisted"),
    (msg("telegram", "42", chat="-100", group=True), "serve", "guest", "group"),
    (msg("discord", "5", chat="any", group=True), "serve", "guest", "group"),  # "*"
    (msg("telegram", " 42 "), "serve", "owner", "owner id"),
    (msg("signal", "+15550001111"), "serve", "owner", "owner id"),
    (msg("signal", "+1999"), "drop", None, "direct messages disabled"),
    (msg("discord", "5"), "serve", "guest", "open direct messages"),
    (msg("telegram", "77"), "serve", "guest", "paired"),
    (msg("slack", "U7"), "serve", "guest", "paired"),  # approved before the policy changed
    (msg("telegram", "78"), "pair", None, "unknown sender (pairing)"),
    (msg("slack", "U1"), "drop", None, "sender not allowlisted"),
]


@pytest.mark.parametrize(("m", "action", "trust", "reason"), CASES)
def test_admit(m, action, trust, reason):
    v = admit(m, CFG, APPROVED)
    assert (v.action, v.trust, v.reason) == (action, trust, reason)


@pytest.mark.parametrize(
    ("m", "owner"),
    [
        (msg("terminal", "me"), True),  # no policy: the local user
        (msg("telegram", "42"), True),
        (msg("telegram", "  "), False),  # an empty id is nobody
        (msg("telegram", "7"), False),
    ],
)
def test_is_owner_sender(m, owner):
    assert is_owner_sender(m, CFG) is owner


def test_only_messaging_channels_have_a_policy():
    assert channel_policy(CFG, "telegram") is CFG.channels.telegram
    assert channel_policy(CFG, "http") is None
    assert channel_policy(CFG, "terminal") is None


@pytest.mark.parametrize(
    ("api", "sender", "key"),
    [
        ({"stateless": True}, "alice", "agent:main:http-stateless:chat1"),
        ({"model": "x"}, "", "agent:main:http-stateless:chat1"),
        ({"model": "x"}, "alice", "agent:main:http:alice"),
    ],
)
def test_an_api_caller_names_its_session_or_gets_a_throwaway_one(api, sender, key):
    assert session_key(msg("http", sender, chat="chat1", api=api), CFG, "owner") == key
