"""The daemon prunes the outbox at start-up: a row the owner discarded from the Inbox goes
once older than the keep limit, like a sent or failed one (it stayed forever before); a
fresh discarded row stays, and the Inbox still lists it."""

from __future__ import annotations

import time

from bot.delivery.outbox import KEEP_DONE
from bot.store import Store
from tests.e2e import eventually, make_config, running

DAY = 86400.0


def _discarded(store: Store, text: str, when: float) -> int:
    """A reply that failed and that the owner discarded at ``when`` (the Inbox's Discard)."""
    (rid,) = store.add_outbox("telegram", [{"chat_id": "1", "text": text}], kind="reply")
    store.outbox_sending(rid)
    store.outbox_done(rid, "failed", error="chat not found")
    assert store.outbox_discard(rid, when)
    return rid


async def test_a_discarded_row_past_the_keep_limit_is_pruned_at_start_up(tmp_path, llm):
    cfg = make_config(tmp_path, llm)
    store = Store(cfg.db_path)
    old = _discarded(store, "given up on last month", time.time() - KEEP_DONE - DAY)
    fresh = _discarded(store, "given up on this morning", time.time() - DAY)
    store.close()

    async with running(cfg) as daemon:
        live = daemon.store
        await eventually(lambda: live.outbox_state(old) is None)
        assert live.outbox_state(fresh) == "discarded"  # the twin: younger than the limit
        assert [i["id"] for i in live.outbox_items("discarded")] == [fresh]
