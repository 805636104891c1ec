"""Group gating and the apology: pure decisions, table-driven."""

from __future__ import annotations

import pytest

from bot.config import ChannelPolicy
from bot.conversation import failures, gating
from channels.base import InboundMessage


def group(text="", **kw):
    return InboundMessage(
        channel="fake", chat_id="g1", sender_id="u1", text=text, chat_type="group", **kw
    )


@pytest.mark.parametrize(
    ("stored", "require_mention", "expected"),
    [
        ("always", True, "always"),
        ("mention", False, "mention"),
        (None, True, "mention"),
        ("", False, "always"),
        ("nonsense", True, "mention"),
    ],
)
def test_activation(stored, require_mention, expected):
    pol = ChannelPolicy(require_mention=require_mention)
    assert gating.activation(stored, pol) == expected


def test_activation_without_a_policy_asks_for_a_mention():
    assert gating.activation(None, None) == "mention"


@pytest.mark.parametrize(
    ("msg", "expected"),
    [
        (group("hello all"), False),
        (group("hey Chela, look"), True),
        (group("CHELA?"), True),
        (group("chelas are birds"), False),  # a word, not a prefix
        (group("x", mentioned=True), True),
        (group("x", reply_to_bot=True), True),
    ],
)
def test_mentioned(msg, expected):
    assert gating.mentioned(msg, gating.name_pattern("Chela")) is expected


def test_no_name_matches_nothing():
    assert gating.name_pattern("") is None
    assert gating.mentioned(group("chela"), None) is False


def test_addressed():
    name = gating.name_pattern("Chela")
    assert gating.addressed(group("anything"), "always", name)
    assert not gating.addressed(group("anything"), "mention", name)
    assert gating.addressed(group("chela hi"), "mention", name)


def test_apology():
    msg = InboundMessage(
        channel="c", chat_id="1", sender_id="u", text="", thread_id="t", account="a"
    )
    out = failures.apology(msg)
    assert (out.chat_id, out.thread_id, out.account, out.text) == ("1", "t", "a", failures.APOLOGY)
