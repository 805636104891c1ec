"""The Control UI's read-only store views (bot/store/views.py), on an in-memory store.

Rows are written with plain INSERTs so each test sets exactly the columns a view reads."""

from __future__ import annotations

import json

import pytest

from bot.store import Store
from bot.store.views import StoredMessage, like_pattern


@pytest.fixture
def store():
    s = Store(":memory:")
    yield s
    s.close()


def _session(store: Store, key: str, *, epoch: int = 0, updated: float = 1.0) -> None:
    store.db.execute(
        "INSERT INTO sessions(key, epoch, created, updated) VALUES (?,?,?,?)",
        (key, epoch, updated, updated),
    )


def _message(
    store: Store,
    key: str,
    data: dict,
    *,
    epoch: int = 0,
    turn: str = "",
    kind: str = "chat",
    created: float = 1.0,
) -> int:
    cur = store.db.execute(
        "INSERT INTO messages(session_key, epoch, turn, kind, role, data, chars, created)"
        " VALUES (?,?,?,?,?,?,?,?)",
        (key, epoch, turn, kind, data["role"], json.dumps(data), 1, created),
    )
    return int(cur.lastrowid or 0)


def _usage(store: Store, key: str, turn: str, cost: float) -> None:
    store.db.execute(
        "INSERT INTO usage(session_key, turn, model, cost_usd, created) VALUES (?,?,?,?,?)",
        (key, turn, "m", cost, 1.0),
    )


def _outbox(store: Store, channel: str, state: str, updated: float) -> None:
    store.db.execute(
        "INSERT INTO outbox(channel, account, chat_id, kind, payload, nonce, state, created,"
        " updated) VALUES (?,?,?,?,?,?,?,?,?)",
        (channel, "default", "1", "reply", "{}", "n", state, updated, updated),
    )


# ------------------------------------------------------------------ transcript_rows


def test_transcript_rows_of_an_unknown_session_are_empty(store):
    assert store.transcript_rows("agent:main:nobody") == []


def test_transcript_rows_are_the_current_epoch_after_the_summary_oldest_first(store):
    key = "agent:main:telegram:direct:1"
    _session(store, key, epoch=1)
    _message(store, key, {"role": "user", "content": "old epoch"}, epoch=0)
    summarised = _message(store, key, {"role": "user", "content": "summarised"}, epoch=1)
    kept = [
        _message(store, key, {"role": "user", "content": "hi"}, epoch=1, created=2.0),
        _message(store, key, {"role": "assistant", "content": "beat"}, epoch=1, kind="heartbeat"),
    ]
    _message(store, "agent:main:other", {"role": "user", "content": "elsewhere"}, epoch=1)
    store.db.execute(
        "INSERT INTO summaries(session_key, epoch, upto_id, text, tokens, created)"
        " VALUES (?,?,?,?,?,?)",
        (key, 1, summarised, "s", 1, 1.0),
    )
    rows = store.transcript_rows(key)
    assert [r.id for r in rows] == kept
    assert rows[0] == StoredMessage(kept[0], {"role": "user", "content": "hi"}, 2.0, "chat")
    assert rows[1].kind == "heartbeat"


def test_transcript_rows_before_an_id(store):
    key = "agent:main:main"
    _session(store, key)
    ids = [_message(store, key, {"role": "user", "content": str(i)}) for i in range(4)]
    assert [r.id for r in store.transcript_rows(key, before=ids[2])] == ids[:2]
    assert [r.id for r in store.transcript_rows(key, before=None)] == ids


# ------------------------------------------------------------------ turns and costs


def test_turn_answers_are_the_turns_assistant_messages_newest_first(store):
    key = "agent:main:main"
    _message(store, key, {"role": "user", "content": "q"}, turn="t1")
    a1 = _message(store, key, {"role": "assistant", "content": "a1"}, turn="t1")
    a2 = _message(store, key, {"role": "assistant", "content": "a2"}, turn="t1")
    _message(store, key, {"role": "assistant", "content": "other"}, turn="t2")
    _message(store, "agent:main:x", {"role": "assistant", "content": "x"}, turn="t1")
    answers = store.turn_answers(key, "t1")
    assert [(r.id, r.data["content"]) for r in answers] == [(a2, "a2"), (a1, "a1")]
    assert store.turn_answers(key, "missing") == []


def test_turn_cost_and_session_costs(store):
    _usage(store, "a", "t1", 0.25)
    _usage(store, "a", "t1", 0.5)
    _usage(store, "a", "t2", 1.0)
    _usage(store, "b", "t1", 2.0)
    assert store.turn_cost("a", "t1") == pytest.approx(0.75)
    assert store.turn_cost("a", "nothing") == 0.0
    assert store.session_costs() == pytest.approx({"a": 1.75, "b": 2.0})
    assert Store(":memory:").session_costs() == {}


# ------------------------------------------------------------------ search


@pytest.mark.parametrize(
    ("text", "pattern"),
    [
        ("abc", "%abc%"),
        ("50%", "%50\\%%"),
        ("a_b", "%a\\_b%"),
        ("c:\\x", "%c:\\\\x%"),
    ],
)
def test_like_pattern_escapes_the_wildcards(text, pattern):
    assert like_pattern(text) == pattern


def test_search_sessions_matches_keys_and_current_messages(store):
    _session(store, "agent:main:telegram:direct:42", epoch=1)
    _session(store, "agent:main:main", epoch=1)
    _session(store, "agent:main:slack:channel:c9", epoch=0)
    _message(store, "agent:main:main", {"role": "user", "content": "banana bread"}, epoch=1)
    _message(store, "agent:main:main", {"role": "user", "content": "old cherry"}, epoch=0)
    assert store.search_sessions("direct:42") == {"agent:main:telegram:direct:42"}
    assert store.search_sessions("banana") == {"agent:main:main"}
    assert store.search_sessions("cherry") == set()  # an earlier epoch is not searched
    assert store.search_sessions("agent") == {
        "agent:main:telegram:direct:42",
        "agent:main:main",
        "agent:main:slack:channel:c9",
    }


def test_search_sessions_takes_like_wildcards_literally(store):
    _session(store, "agent:main:main")
    _session(store, "agent:main:a_b")
    _session(store, "agent:main:axb")
    _message(store, "agent:main:main", {"role": "user", "content": "100% sure"})
    assert store.search_sessions("a_b") == {"agent:main:a_b"}  # "_" is not any character
    assert store.search_sessions("%") == {"agent:main:main"}  # "%" is not anything
    assert store.search_sessions("0% s") == {"agent:main:main"}
    assert store.search_sessions("\\") == set()


# ------------------------------------------------------------------ session updates


def test_session_updates(store):
    assert store.newest_session_update() == 0.0
    _session(store, "b", updated=30.0)
    _session(store, "a", updated=10.0)
    _session(store, "c", updated=20.0)
    assert store.newest_session_update() == 30.0
    assert store.sessions_updated_after(10.0) == [("c", 20.0), ("b", 30.0)]
    assert store.sessions_updated_after(30.0) == []


# ------------------------------------------------------------------ channels


def test_channel_traffic(store):
    for ch, created in (("telegram", 5.0), ("telegram", 9.0), ("slack", 3.0)):
        store.db.execute(
            "INSERT INTO inbound(channel, account, chat_id, message_id, session_key, payload,"
            " created) VALUES (?,?,?,?,?,?,?)",
            (ch, "default", "1", f"{created}", "k", "{}", created),
        )
    _outbox(store, "telegram", "sent", 7.0)
    _outbox(store, "telegram", "sent", 8.0)
    _outbox(store, "telegram", "failed", 99.0)
    _outbox(store, "telegram", "queued", 1.0)
    _outbox(store, "telegram", "queued", 2.0)
    _outbox(store, "slack", "sending", 1.0)
    _outbox(store, "slack", "discarded", 50.0)
    assert store.last_inbound_by_channel() == {"telegram": 9.0, "slack": 3.0}
    assert store.last_sent_by_channel() == {"telegram": 8.0}
    assert store.unsent_by_channel() == {
        "telegram": {"failed": 1, "queued": 2},
        "slack": {"sending": 1},
    }
