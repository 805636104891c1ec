"""The dispatch stage: one decision per admitted message, addressed decided once."""

from __future__ import annotations

from bot.rules.admission import Verdict
from bot.conversation.dispatch import dispatch
from bot.conversation.types import Accepted, CommandCall, HistoryOnly, Skipped, TurnCall
from channels.base import InboundMessage

DM = InboundMessage(channel="telegram", chat_id="42", sender_id="42", text="hi")
GROUP = InboundMessage(
    channel="telegram", chat_id="-1", sender_id="42", text="hi", chat_type="group"
)
SERVE = Verdict("serve", "owner")


def acc(msg, verdict=SERVE):
    return Accepted(msg, "k", verdict, "work")


def never():
    raise AssertionError("not asked")


def test_a_sender_no_longer_served_is_skipped():
    got = dispatch(acc(DM, Verdict("drop", reason="gone")), command=never, addressed=never)
    assert got == Skipped("gone", "telegram", "k")


def test_a_command_comes_first():
    call = CommandCall("help", "", DM, "k", SERVE, True)
    assert dispatch(acc(GROUP), command=lambda: call, addressed=never) is call


def test_a_group_message_not_addressed_joins_the_history():
    asked = []

    def addressed():
        asked.append(1)
        return False

    got = dispatch(acc(GROUP), command=lambda: None, addressed=addressed)
    assert got == HistoryOnly(GROUP, "k") and asked == [1]
    got = dispatch(acc(GROUP), command=lambda: None, addressed=lambda: True)
    assert got == TurnCall(GROUP, "k", SERVE, "work")


def test_a_direct_message_is_a_turn_without_asking_about_addressing():
    assert dispatch(acc(DM), command=lambda: None, addressed=never) == TurnCall(
        DM, "k", SERVE, "work"
    )
