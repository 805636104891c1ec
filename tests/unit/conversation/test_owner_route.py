"""A chat turn stores the owner's last route in its own commit: both keys (overall and the
channel's) with the turn or neither, the owner's latest direct chat, and only the owner's
direct chat."""

from __future__ import annotations

import logging

import pytest

from bot.conversation import owner_route
from bot.agent.turn import TurnResult
from bot.conversation.commit import Commit, OwnerChat
from bot.store import Store
from channels.base import InboundMessage, OutboundMessage


class Health:
    def failed(self, e, what):
        pass

    def ok(self):
        pass


def dm(chat: str = "42", **kw) -> InboundMessage:
    return InboundMessage(channel="telegram", chat_id=chat, sender_id=chat, text="hi", **kw)


def result() -> TurnResult:
    return TurnResult(text="Hello", to_store=[{"role": "user", "content": "hi"}], turn_id="t1")


async def a_turn(store: Store, msg: InboundMessage, trust: str = "owner", mid: str = "m1"):
    iid = store.add_inbound("telegram", "default", msg.chat_id, mid, "k", msg.to_json())
    assert iid is not None
    outs = [OutboundMessage(chat_id=msg.chat_id, text="Hello")]
    return await Commit(store, Health(), lambda: True).turn(
        "k",
        result(),
        iid,
        outs,
        {"api:k": {"seen": 1}},
        channel="telegram",
        owner=OwnerChat(msg, trust, True),
    )


@pytest.fixture
def store(tmp_path):
    s = Store(tmp_path / "s.db")
    yield s
    s.close()


async def test_the_route_is_stored_with_the_turn_and_follows_the_owners_chat(store):
    await a_turn(store, dm("42"))
    assert store.get("route:last")["chat_id"] == "42"
    assert store.get("route:last:telegram")["chat_id"] == "42"
    assert store.get("api:k") == {"seen": 1}
    await a_turn(store, dm("43"), mid="m2")  # the owner writes from another chat
    assert store.get("route:last")["chat_id"] == "43"
    assert store.get("route:last:telegram")["chat_id"] == "43"


async def test_a_failed_commit_stores_no_route_and_the_next_one_does(store):
    store.db.execute(
        "CREATE TEMP TRIGGER refuse BEFORE UPDATE OF status ON inbound"
        " BEGIN SELECT RAISE(ABORT, 'refused'); END"
    )
    with pytest.raises(Exception, match="refused"):
        await a_turn(store, dm("42"))
    assert store.get("route:last") is None
    store.db.execute("DROP TRIGGER refuse")
    await a_turn(store, dm("42"), mid="m2")
    assert store.get("route:last")["chat_id"] == "42"


async def test_a_guest_or_a_group_records_no_route(store):
    """Twin: only the owner's direct chat is the owner's route (SPEC §9)."""
    await a_turn(store, dm("42"), trust="guest")
    await a_turn(store, dm("43", chat_type="group"), mid="m2")
    assert store.get("route:last") is None and store.get("route:last:telegram") is None
    assert store.get("api:k") == {"seen": 1}  # the turn's own state is stored


async def test_a_route_that_cannot_be_worked_out_never_fails_the_turn(store, monkeypatch, caplog):
    def broken(*a, **kw):
        raise RuntimeError("no route today")

    monkeypatch.setattr(owner_route, "changes", broken)
    with caplog.at_level(logging.WARNING):
        rows = await a_turn(store, dm("42"))
    assert len(rows) == 1 and [r.id for r in store.inbound_with_status("done")] == [1]
    assert "could not record the last route" in caplog.text
