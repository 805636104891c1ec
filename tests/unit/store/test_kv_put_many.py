"""Store.put_many: several keys in ONE statement (so one transaction): both or neither."""

from __future__ import annotations

import json
import sqlite3

import pytest

from bot.store import Store


def _statements(store: Store) -> list[str]:
    seen: list[str] = []
    store.db.set_trace_callback(seen.append)
    return seen


def test_both_keys_are_written_by_one_statement(tmp_path):
    store = Store(tmp_path / "s.sqlite3")
    store.put("a", "old")
    seen = _statements(store)
    store.put_many({"a": {"chat_id": "42"}, "b": [1, 2]})
    assert len(seen) == 1 and seen[0].startswith("INSERT OR REPLACE INTO kv")
    assert store.get("a") == {"chat_id": "42"}
    assert store.get("b") == [1, 2]


def test_a_failing_key_writes_neither(tmp_path):
    """The second key's write is refused (a trigger stands in for a full disk): the first
    key keeps its old value, where two put() calls would have changed it."""
    store = Store(tmp_path / "s.sqlite3")
    store.put("a", "old")
    store.db.execute(
        "CREATE TEMP TRIGGER refuse_b BEFORE INSERT ON kv WHEN NEW.key='b'"
        " BEGIN SELECT RAISE(ABORT, 'refused'); END"
    )
    with pytest.raises(sqlite3.IntegrityError):
        store.put_many({"a": "new", "b": "new"})
    assert store.get("a") == "old"
    assert store.get("b") is None
    assert not store.db.in_transaction
    # twin: one key at a time, the first one lands before the second fails
    with pytest.raises(sqlite3.IntegrityError):
        for k in ("a", "b"):
            store.put(k, "new")
    assert store.get("a") == "new"


def test_nothing_to_write_runs_no_statement(tmp_path):
    store = Store(tmp_path / "s.sqlite3")
    seen = _statements(store)
    store.put_many({})
    assert seen == []


def test_a_value_under_two_keys_is_stored_under_both(tmp_path):
    """The owner's route goes under two keys as one object (encoded once): both rows hold
    it; other values keep their own encoding."""
    from bot.store.kv import kv_params

    route = {"channel": "telegram", "chat_id": "42"}
    values = {"route:last": route, "route:last:telegram": route, "n": [1], "m": [1]}
    assert kv_params(values) == [x for k, v in values.items() for x in (k, json.dumps(v))]
    store = Store(tmp_path / "s.sqlite3")
    store.put_many(values)
    assert store.get("route:last") == store.get("route:last:telegram") == route
    assert store.get("n") == store.get("m") == [1]
