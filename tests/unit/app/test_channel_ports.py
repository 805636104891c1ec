"""The cursor ports the app gives a poll-based channel (bot/app/channel_ports.py): the value
lives in the store; an offset file an older Chela kept is taken over once and removed."""

from __future__ import annotations

from bot.app.channel_ports import cursor_ports
from bot.store import Store

KEY = "cursor.whatsapp"


def test_an_old_offset_file_is_taken_over_once_then_removed(tmp_path):
    old = tmp_path / "whatsapp" / "default.offset"
    old.parent.mkdir()
    old.write_text("41\n")
    store = Store(":memory:")
    load, save = cursor_ports(store, KEY, old)
    assert load() == 41 and store.get(KEY) == 41 and not old.exists()
    save(42)
    assert load() == 42  # from the store from now on


def test_the_store_wins_over_a_stale_file(tmp_path):
    old = tmp_path / "default.offset"
    old.write_text("5")
    store = Store(":memory:")
    store.put(KEY, 9)
    load, _ = cursor_ports(store, KEY, old)
    assert load() == 9 and not old.exists()


def test_no_value_before_the_first_start_and_none_without_a_store(tmp_path):
    store = Store(":memory:")
    assert cursor_ports(store, KEY, tmp_path / "missing.offset")[0]() is None
    old = tmp_path / "kept.offset"
    old.write_text("3")
    load, save = cursor_ports(None, KEY, old)  # a send-only run: nothing read, nothing moved
    save(4)
    assert load() is None and old.exists()
