"""Pairing's one decision place and the owner's notice (SPEC §17.4, §16.4), fast tier:
requests new or repeated, codes found on any channel or named with theirs, the notices
published, the owner route of each channel, and the notice's untrusted text."""

from __future__ import annotations

import pytest

from bot.conversation import owner_route
from bot.conversation import pairing_requests as pairing
from bot.config import parse_config
from bot.conversation.pairing import owner_notice
from bot.reports.notices import Notices
from bot.store import Store
from channels.base import InboundMessage

T0 = 1_000_000.0


@pytest.fixture
def store(tmp_path):
    s = Store(tmp_path / "s.db")
    yield s
    s.close()


def test_one_new_request_then_quiet_then_the_hourly_repeat_is_the_same_request(store):
    first = pairing.request(store, "telegram", "77", "Eve", "hello there", now=T0)
    assert first.new and first.fresh_code and first.reply and first.code in first.reply
    again = pairing.request(store, "telegram", "77", "Eve", "are you there?", now=T0 + 60)
    assert again == pairing.Created(None, first.code, new=False)  # nobody hears of it
    repeat = pairing.request(store, "telegram", "77", "Eve", "hello??", now=T0 + 3700)
    assert repeat.reply and repeat.fresh_code and repeat.code != first.code
    assert not repeat.new  # the owner is not told again
    [row] = pairing.pending(store, now=T0 + 3700)
    assert row["first_message"] == "hello there" and row["code"] == repeat.code
    assert row["expires"] == T0 + 3700 + pairing.CODE_TTL


def test_pending_lists_every_channel_as_the_ui_does(store):
    pairing.request(store, "telegram", "77", "Eve", "hi", now=T0)
    pairing.request(store, "signal", "+1555", "", "yo", now=T0 + 1)
    rows = pairing.pending(store, now=T0 + 2)
    assert [(r["channel"], r["sender_id"], r["first_message"]) for r in rows] == [
        ("telegram", "77", "hi"),
        ("signal", "+1555", "yo"),
    ]
    assert set(rows[0]) == {
        "channel",
        "code",
        "sender_id",
        "sender_name",
        "first_message",
        "created",
        "expires",
    }
    assert pairing.pending(store, now=T0 + pairing.CODE_TTL + 5) == []


def test_decide_finds_the_code_on_any_channel_and_publishes(store):
    notices = Notices()
    code = pairing.request(store, "signal", "+1555", "Bo", "hi", now=T0).code
    assert pairing.approve(store, None, code.lower(), now=T0 + 1, notices=notices) == "+1555"
    assert store.is_approved("signal", "+1555") and store.take_new_approvals() == [
        ("signal", "+1555")
    ]
    [n] = notices.since(None)
    assert (n.name, n.data) == (
        "pairing.resolved",
        {"channel": "signal", "code": code, "decision": "approve"},
    )
    assert pairing.pending(store, now=T0 + 2) == []


def test_deny_drops_the_request_and_tells_nobody_approved(store):
    notices = Notices()
    code = pairing.request(store, "telegram", "77", "Eve", "hi", now=T0).code
    row = pairing.deny(store, "telegram", code, now=T0 + 1, notices=notices)
    assert row["sender_id"] == "77" and store.pairing_requests() == []
    assert not store.is_approved("telegram", "77") and store.take_new_approvals() == []
    assert notices.since(None)[0].data["decision"] == "deny"
    with pytest.raises(pairing.UnknownCode):
        pairing.deny(store, "telegram", code, now=T0 + 2)


def test_unknown_expired_and_wrong_channel_codes_decide_nothing(store):
    notices = Notices()
    code = pairing.request(store, "telegram", "77", "Eve", "hi", now=T0).code
    with pytest.raises(pairing.UnknownCode, match="on signal"):
        pairing.approve(store, "signal", code, now=T0 + 1, notices=notices)
    with pytest.raises(pairing.UnknownCode):
        pairing.approve(store, None, "ZZZZZZZZ", now=T0 + 1, notices=notices)
    with pytest.raises(pairing.ExpiredCode, match="expired"):
        pairing.approve(store, None, code, now=T0 + pairing.CODE_TTL, notices=notices)
    assert notices.since(None) == [] and not store.is_approved("telegram", "77")


def test_the_same_code_on_two_channels_needs_the_channel(store):
    for channel in ("telegram", "signal"):
        store.upsert_pairing(channel, "9", "", "SAMECODE", T0, T0, "hi")
    with pytest.raises(pairing.UnknownCode, match="name the channel"):
        pairing.approve(store, None, "SAMECODE", now=T0 + 1)
    assert pairing.approve(store, "signal", "SAMECODE", now=T0 + 1) == "9"
    assert store.is_approved("signal", "9") and not store.is_approved("telegram", "9")


def cfg_with(**channels):
    return parse_config({"channels": channels, "owner": {"numbers": ["+1999"]}})


@pytest.mark.parametrize(
    ("channel", "section", "chat"),
    [
        ("telegram", {"allow_from": ["42", "43"]}, "42"),
        ("discord", {"allow_from": ["4242"]}, "user:4242"),
        ("slack", {"allow_from": ["UALICE"]}, "UALICE"),
        ("signal", {"allow_from": ["+1555"]}, "+1555"),
        ("signal", {}, "+1999"),  # Signal: owner.numbers too
    ],
)
def test_the_owner_route_is_the_first_owner_id(channel, section, chat):
    cfg = cfg_with(**{channel: section})
    route = owner_route.first_owner(cfg, channel, "default")
    assert route == {"channel": channel, "chat_id": chat, "account": "default"}


def test_no_owner_id_is_no_owner_route():
    assert owner_route.first_owner(cfg_with(telegram={}), "telegram") is None
    assert owner_route.first_owner(cfg_with(), "terminal") is None


def test_the_notice_quotes_what_the_stranger_wrote_on_one_line():
    forged = "hi\nPairing request on telegram from owner\nTo admit them: /pair approve AAAAAAAA"
    msg = InboundMessage(
        channel="telegram",
        chat_id="77",
        sender_id="77",
        sender_name='Eve "the owner"\u202e',
        text=forged + " " + "x" * 400,
    )
    text = owner_notice(msg, "CODE2345")
    lines = text.splitlines()
    assert len(lines) == 5 and lines[0].startswith("Pairing request on telegram from ")
    assert '\\"the owner\\"' in lines[0] and "\u202e" not in text
    assert lines[1].startswith('Their message: "hi Pairing request') and len(lines[1]) < 230
    assert lines[3:] == [
        "To admit them as a guest: /pair approve CODE2345",
        "To refuse: /pair deny CODE2345",
    ]
