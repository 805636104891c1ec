"""The turn-event hub: subscribers get their session's events in order, never block a turn."""

from __future__ import annotations

from bot.conversation.events import TurnEvent, TurnEvents


def ev(kind, key="k1", text=""):
    return TurnEvent(kind, key, "t1", text=text)


async def test_subscriber_gets_its_sessions_events_in_order():
    hub = TurnEvents()
    with hub.subscribe("k1") as mine, hub.subscribe() as every:
        hub.publish(ev("started"))
        hub.publish(ev("text", "k2", "other"))
        hub.publish(ev("final", text="done"))
        got = [mine.get_nowait(), mine.get_nowait(), mine.get_nowait()]
        assert [e.kind if e else None for e in got] == ["started", "final", None]
        assert [every.get_nowait().session_key for _ in range(3)] == ["k1", "k2", "k1"]
    assert hub.subscribers == 0


async def test_a_slow_subscriber_loses_the_oldest_events_and_never_blocks():
    hub = TurnEvents()
    with hub.subscribe() as sub:
        for i in range(1005):
            hub.publish(ev("text", text=str(i)))
        assert sub.dropped == 5
        first = await sub.get()
        assert first.text == "5"


async def test_publish_with_no_subscriber_is_a_no_op():
    TurnEvents().publish(ev("started"))
