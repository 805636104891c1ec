"""Pruning the outbox (Store.prune_outbox): rows that are over — sent, failed, or set aside
with the Inbox's Discard — go once last touched before the limit; rows still to send stay
whatever their age."""

from __future__ import annotations

import pytest

from bot.store import Store

DAY = 86400.0
NOW = 1_800_000_000.0
LIMIT = NOW - 7 * DAY


@pytest.fixture
def store():
    s = Store(":memory:")
    yield s
    s.close()


def _row(store: Store, state: str, updated: float) -> int:
    """An outbox row in ``state``, last touched at ``updated``, reached the way the daemon
    reaches it (queued, then an attempt, then the Inbox's Discard for 'discarded')."""
    (rid,) = store.add_outbox("telegram", [{"chat_id": "1", "text": state}], kind="reply")
    if state != "queued":
        store.outbox_sending(rid)
    if state in ("sent", "failed", "discarded"):
        store.outbox_done(rid, "sent" if state == "sent" else "failed")
    if state == "discarded":
        assert store.outbox_discard(rid, updated)
    store.db.execute("UPDATE outbox SET updated=? WHERE id=?", (updated, rid))
    assert store.outbox_state(rid) == state
    return rid


def _left(store: Store, ids: list[int]) -> list[int]:
    return [r for r in ids if store.outbox_state(r) is not None]


def test_a_discarded_row_older_than_the_limit_is_pruned(store):
    old = _row(store, "discarded", LIMIT - DAY)
    assert store.prune_outbox(LIMIT) == 1
    assert store.outbox_state(old) is None


def test_twin_a_fresh_discarded_row_stays(store):
    fresh = _row(store, "discarded", LIMIT + DAY)
    assert store.prune_outbox(LIMIT) == 0
    assert store.outbox_state(fresh) == "discarded"


def test_sent_failed_and_discarded_go_by_the_same_age_rule(store):
    old = [_row(store, st, LIMIT - 1) for st in ("sent", "failed", "discarded")]
    fresh = [_row(store, st, LIMIT + 1) for st in ("sent", "failed", "discarded")]
    assert store.prune_outbox(LIMIT) == 3
    assert _left(store, old + fresh) == fresh


@pytest.mark.parametrize("state", ["queued", "sending"])
@pytest.mark.parametrize("age", [0.0, 8 * DAY, 365 * DAY])
def test_rows_still_to_send_stay_whatever_their_age(store, state, age):
    rid = _row(store, state, NOW - age)
    assert store.prune_outbox(LIMIT) == 0
    assert store.outbox_state(rid) == state
    assert [r.id for r in store.outbox_pending()] == [rid]
