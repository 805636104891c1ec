"""A turn's messages go into the messages table in one statement (multi-row VALUES; a
long turn in chunks of 100 rows), in order, the same rows as one INSERT per message."""

from __future__ import annotations

from bot.store import Store


def _turn(n: int) -> list[dict]:
    return [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i}"} for i in range(n)
    ]


def _stored(store: Store) -> list[tuple]:
    return store.db.execute(
        "SELECT session_key, epoch, turn, kind, role, data, chars, tokens FROM messages ORDER BY id"
    ).fetchall()


def test_a_turn_is_one_insert(tmp_path):
    store = Store(tmp_path / "s.db")
    store.session("k")
    seen: list[str] = []
    store.db.set_trace_callback(seen.append)
    store.commit_turn("k", "t1", _turn(2), kind="cron")
    assert sum(s.startswith("INSERT INTO messages") for s in seen) == 1
    rows = _stored(store)
    assert [(r[0], r[2], r[3], r[4]) for r in rows] == [
        ("k", "t1", "cron", "user"),
        ("k", "t1", "cron", "assistant"),
    ]


def test_a_long_turn_goes_in_chunks_in_order(tmp_path):
    """Twin: 250 messages (three statements) are stored exactly as one row at a time."""
    store, one_by_one = Store(tmp_path / "a.db"), Store(tmp_path / "b.db")
    msgs = _turn(250)
    seen: list[str] = []
    store.db.set_trace_callback(seen.append)
    store.commit_turn("k", "t1", msgs)
    store.db.set_trace_callback(None)
    assert sum(s.startswith("INSERT INTO messages") for s in seen) == 3
    for m in msgs:
        one_by_one.commit_turn("k", "t1", [m])
    assert _stored(store) == _stored(one_by_one)
    assert [m["content"] for m in store.history("k", limit=300, max_chars=10**6)] == [
        m["content"] for m in msgs
    ]


def test_a_turn_without_messages_inserts_none(tmp_path):
    store = Store(tmp_path / "s.db")
    seen: list[str] = []
    store.db.set_trace_callback(seen.append)
    store.commit_turn("k", "", [])
    assert not [s for s in seen if "INTO messages" in s]
