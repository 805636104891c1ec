"""owner_route.record writes the owner's last route only when it changes (issue 28 item 5):
the owner writing from the same chat again costs no key-value write, and the stored route is
still the owner's latest direct chat after any sequence of chats."""

from __future__ import annotations

from bot.conversation import owner_route
from bot.store import Store
from channels.base import InboundMessage


def _dm(chat: str, channel: str = "telegram") -> InboundMessage:
    return InboundMessage(channel=channel, chat_id=chat, sender_id=chat, text="hi")


def _writes(store: Store) -> list[str]:
    seen: list[str] = []
    store.db.set_trace_callback(lambda sql: seen.append(sql) if "INTO kv" in sql else None)
    return seen


def test_the_same_chat_again_writes_nothing(tmp_path):
    store = Store(tmp_path / "s.sqlite3")
    assert owner_route.record(store, _dm("42"), trust="owner", proactive=True)
    writes = _writes(store)
    for _ in range(3):
        assert owner_route.record(store, _dm("42"), trust="owner", proactive=True)
    assert writes == []
    assert store.get("route:last")["chat_id"] == "42"
    assert store.get("route:last:telegram")["chat_id"] == "42"


def test_a_new_chat_is_written_and_only_the_keys_that_change(tmp_path):
    """Twin: another chat or channel is stored at once; returning to the first chat stores
    it again, so the route always names the latest chat."""
    store = Store(tmp_path / "s.sqlite3")
    owner_route.record(store, _dm("42"), trust="owner", proactive=True)
    writes = _writes(store)
    owner_route.record(store, _dm("43"), trust="owner", proactive=True)
    assert len(writes) == 1  # both keys in one statement (Store.put_many)
    assert store.get("route:last")["chat_id"] == "43"
    assert store.get("route:last:telegram")["chat_id"] == "43"
    owner_route.record(store, _dm("7", channel="signal"), trust="owner", proactive=True)
    assert store.get("route:last")["channel"] == "signal"
    assert store.get("route:last:signal")["chat_id"] == "7"
    writes.clear()
    owner_route.record(store, _dm("43"), trust="owner", proactive=True)
    assert len(writes) == 1  # route:last changes back; route:last:telegram already says 43
    assert store.get("route:last")["chat_id"] == "43"
    assert store.get("route:last:telegram")["chat_id"] == "43"


def test_a_fresh_store_writes_again(tmp_path):
    """What one process remembers does not hold for another: a new Store (a restart, another
    process) writes the route at its first owner message."""
    path = tmp_path / "s.sqlite3"
    first = Store(path)
    owner_route.record(first, _dm("42"), trust="owner", proactive=True)
    first.put("route:last", {"channel": "telegram", "chat_id": "9"})
    first.close()
    second = Store(path)
    owner_route.record(second, _dm("42"), trust="owner", proactive=True)
    assert second.get("route:last")["chat_id"] == "42"


def test_a_guest_never_writes(tmp_path):
    store = Store(tmp_path / "s.sqlite3")
    assert not owner_route.record(store, _dm("42"), trust="guest", proactive=True)
    assert store.get("route:last") is None
