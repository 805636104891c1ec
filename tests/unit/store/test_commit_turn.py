"""Store.commit_turn: a turn's messages (in order, with the session's epoch), its outbox
rows, the inbound status, the usage and the state values land together or not at all; a
caller that knows the inbound row's channel may pass it (the same rows as looked up);
commit_turn_rows hands back the outbox rows as stored."""

from __future__ import annotations

import pytest

from bot.store import OutboxRow, Store

TURN = [
    {"role": "user", "content": "hé, what's up?"},
    {"role": "assistant", "content": "all fine", "tool_calls": []},
]
OUT = [{"chat_id": "42", "text": "all fine", "account": "default", "media": []}]
USAGE = {"prompt_tokens": 11, "completion_tokens": 5}

# what a turn leaves in the database, without the ids' times and nonces
DUMP = {
    "messages": "SELECT session_key, epoch, turn, kind, role, data, chars, tokens FROM messages ORDER BY id",
    "outbox": "SELECT id, channel, account, chat_id, kind, payload, inbound_id, state, attempts"
    " FROM outbox ORDER BY id",
    "inbound": "SELECT id, status, outbound FROM inbound ORDER BY id",
    "sessions": "SELECT key, epoch, usage_in, usage_out FROM sessions ORDER BY key",
    "kv": "SELECT key, value FROM kv ORDER BY key",
}


def dump(store: Store) -> dict[str, list]:
    return {k: store.db.execute(q).fetchall() for k, q in DUMP.items()}


def a_turn(store: Store, *, channel: str | None, reset: bool = True) -> list[OutboxRow]:
    """A stored inbound message answered by a turn (the session reset once before, so its
    epoch is 1), committed with or without the caller's ``channel``."""
    store.session("k")
    if reset:
        store.reset_session("k")
    iid = store.add_inbound("telegram", "default", "42", "m1", "k", {"text": "hi"})
    assert iid is not None
    return store.commit_turn_rows(
        "k",
        "t1",
        TURN,
        inbound_id=iid,
        outbound=OUT,
        usage=USAGE,
        channel=channel,
        state={"api:k": {"seen": ["a"]}, "other": 1},
    )


def test_a_passed_channel_stores_the_same_rows_as_the_looked_up_one(tmp_path):
    looked_up, passed = Store(tmp_path / "a.db"), Store(tmp_path / "b.db")
    a_turn(looked_up, channel=None)
    a_turn(passed, channel="telegram")
    assert dump(passed) == dump(looked_up)
    assert dump(passed)["messages"][0][1] == 1  # the epoch after the reset
    assert dump(passed)["outbox"][0][1] == "telegram"


def test_the_rows_handed_back_are_the_rows_stored(tmp_path):
    store = Store(tmp_path / "s.db")
    rows = a_turn(store, channel="telegram")
    assert rows == store.outbox_rows(r.id for r in rows)
    assert rows == store.outbox_pending()
    assert store.commit_turn("k", "t2", [], outbound=None) == []


def test_a_session_without_a_row_is_created_by_the_commit(tmp_path):
    store = Store(tmp_path / "s.db")
    store.commit_turn("new", "t1", TURN, usage=USAGE)
    assert dump(store)["sessions"] == [("new", 0, 11, 5)]
    assert [m["role"] for m in store.history("new", limit=10, max_chars=10_000)] == [
        "user",
        "assistant",
    ]


def test_a_long_turn_is_stored_in_order_as_one_message_at_a_time_would_be(tmp_path):
    store, one_by_one = Store(tmp_path / "a.db"), Store(tmp_path / "b.db")
    msgs = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i}"}
        for i in range(250)
    ]
    store.commit_turn("k", "t1", msgs, kind="cron")
    for m in msgs:
        one_by_one.commit_turn("k", "t1", [m], kind="cron")
    assert dump(store)["messages"] == dump(one_by_one)["messages"]
    assert [m["content"] for m in store.history("k", limit=300, max_chars=10**6)] == [
        m["content"] for m in msgs
    ]


def test_a_turn_without_messages_stores_none_and_still_marks_the_inbound_done(tmp_path):
    store = Store(tmp_path / "s.db")
    iid = store.add_inbound("telegram", "default", "42", "m1", "k", {"text": "hi"})
    store.commit_turn("k", "", [], inbound_id=iid)
    d = dump(store)
    assert d["messages"] == [] and d["inbound"] == [(iid, "done", None)]


def test_a_failed_commit_stores_nothing(tmp_path):
    store = Store(tmp_path / "s.db")
    store.session("k")
    iid = store.add_inbound("telegram", "default", "42", "m1", "k", {"text": "hi"})
    store.db.execute(
        "CREATE TEMP TRIGGER refuse BEFORE UPDATE OF status ON inbound"
        " BEGIN SELECT RAISE(ABORT, 'refused'); END"
    )
    with pytest.raises(Exception, match="refused"):
        store.commit_turn("k", "t1", TURN, inbound_id=iid, outbound=OUT, usage=USAGE)
    d = dump(store)
    assert d["messages"] == [] and d["outbox"] == [] and d["sessions"] == [("k", 0, 0, 0)]
