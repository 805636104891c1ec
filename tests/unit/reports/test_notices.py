"""The notice stream the Control UI's event stream reads (SPEC §16.5)."""

import asyncio

from bot.reports.notices import Notices


async def test_a_subscriber_receives_what_is_published_while_it_listens():
    notices = Notices()
    notices.publish("approval.pending", {"code": "A1"})  # before: not delivered live
    with notices.subscribe() as queue:
        notices.publish("approval.resolved", {"code": "A1", "decision": "approve"})
        got = await asyncio.wait_for(queue.get(), 1)
    assert (got.seq, got.name, got.data["decision"]) == (2, "approval.resolved", "approve")
    notices.publish("late", {})
    assert queue.empty()  # unsubscribed on leaving the block


def test_replay_returns_only_what_followed_the_given_seq_and_keeps_the_last_n():
    notices = Notices(keep=3)
    for i in range(5):
        notices.publish("n", {"i": i})
    assert [n.data["i"] for n in notices.since(3)] == [3, 4]
    assert [n.seq for n in notices.since(None)] == [3, 4, 5]
    assert notices.seq == 5


def test_a_slow_subscriber_loses_its_oldest_notices_and_never_blocks_publishing(monkeypatch):
    monkeypatch.setattr("bot.reports.notices.QUEUE_LIMIT", 2)
    notices = Notices()
    with notices.subscribe() as queue:
        for i in range(4):
            notices.publish("n", {"i": i})
        assert [queue.get_nowait().data["i"] for _ in range(2)] == [2, 3]
