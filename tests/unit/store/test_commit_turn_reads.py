"""Store.commit_turn without reads it does not need (issue 28 item 5): the session's
epoch comes back from the UPDATE that counts the turn's usage (UPDATE ... RETURNING), and
the caller that knows the inbound row's channel passes it; commit_turn_rows hands back
the outbox rows as stored.  Each case compares with the way it is done without the
shortcut: the same rows are stored."""

from __future__ import annotations


import pytest

from bot.store import OutboxRow, Store
from bot.store import turns as turns_mod

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


def statements(store: Store) -> list[str]:
    seen: list[str] = []
    store.db.set_trace_callback(seen.append)
    return seen


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


def test_the_commit_reads_nothing_when_the_caller_knows_the_channel(tmp_path):
    store = Store(tmp_path / "s.db")
    store.session("k")
    iid = store.add_inbound("telegram", "default", "42", "m1", "k", {"text": "hi"})
    seen = statements(store)
    store.commit_turn("k", "t1", TURN, inbound_id=iid, outbound=OUT, channel="telegram")
    assert [s for s in seen if s.lstrip().upper().startswith("SELECT")] == []
    # twin: without the channel it is looked up, once
    seen.clear()
    iid2 = store.add_inbound("telegram", "default", "42", "m2", "k", {"text": "hi"})
    store.commit_turn("k", "t2", TURN, inbound_id=iid2, outbound=OUT)
    assert len([s for s in seen if s.startswith("SELECT channel FROM inbound")]) == 1


def test_the_rows_handed_back_are_the_rows_stored(tmp_path):
    store = Store(tmp_path / "s.db")
    rows = a_turn(store, channel="telegram")
    assert rows == store.outbox_rows(r.id for r in rows)
    assert rows == store.outbox_pending()
    assert store.commit_turn("k", "t2", [], outbound=None) == []


def test_the_old_sqlite_path_stores_the_same_rows(tmp_path, monkeypatch):
    """SQLite before 3.35 has no RETURNING: the epoch is read in the transaction instead."""
    new = Store(tmp_path / "a.db")
    a_turn(new, channel="telegram")
    monkeypatch.setattr(turns_mod, "RETURNING", False)
    old = Store(tmp_path / "b.db")
    a_turn(old, channel="telegram")
    assert dump(old) == dump(new)


@pytest.mark.parametrize("returning", [True, False])
def test_a_session_without_a_row_is_created_by_the_commit(tmp_path, monkeypatch, returning):
    monkeypatch.setattr(turns_mod, "RETURNING", returning)
    store = Store(tmp_path / "s.db")
    store.commit_turn("new", "t1", TURN, usage=USAGE)
    assert dump(store)["sessions"] == [("new", 0, 11, 5)]
    assert [m["role"] for m in store.history("new", limit=10, max_chars=10_000)] == [
        "user",
        "assistant",
    ]


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
