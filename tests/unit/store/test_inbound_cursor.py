"""A poll-based channel's cursor is written in the same transaction as the inbound row it
comes with (bot/store/inbound.py): it never moves unless the row is stored."""

from __future__ import annotations

import sqlite3

import pytest

from bot.store import Store

KEY = "cursor.whatsapp"


def _add(store: Store, message_id: str, cursor):
    return store.add_inbound(
        "whatsapp", "default", "user:1", message_id, "s", {"text": "hi"}, cursor=cursor
    )


def test_the_row_and_the_cursor_commit_together():
    store = Store(":memory:")
    assert _add(store, "m1", (KEY, 7)) is not None
    assert store.get(KEY) == 7 and len(store.unfinished_inbound()) == 1
    # a message stored before (a re-read batch): no second row, the cursor still moves
    assert _add(store, "m1", (KEY, 9)) is None
    assert store.get(KEY) == 9 and len(store.unfinished_inbound()) == 1


def test_a_failing_insert_leaves_the_cursor_unmoved():
    store = Store(":memory:")
    _add(store, "m1", (KEY, 7))
    # a real failure inside the transaction, after the cursor's write
    store.db.execute(
        "CREATE TRIGGER no_more BEFORE INSERT ON inbound BEGIN SELECT RAISE(ABORT, 'full'); END"
    )
    with pytest.raises(sqlite3.IntegrityError):
        _add(store, "m2", (KEY, 8))
    assert store.get(KEY) == 7 and [r.payload for r in store.unfinished_inbound()] == [
        {"text": "hi"}
    ]
    assert not store.db.in_transaction  # rolled back, the connection usable
    store.db.execute("DROP TRIGGER no_more")
    assert _add(store, "m2", (KEY, 8)) is not None and store.get(KEY) == 8


def test_a_cursor_without_a_row_is_stored_alone():
    store = Store(":memory:")
    store.put_cursor(None)
    assert store.get(KEY) is None
    store.put_cursor((KEY, 3))
    assert store.get(KEY) == 3
