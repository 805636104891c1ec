"""The rows a turn's commit wrote are handed to the outbox as stored (``deliver_rows``,
``Outbox.enqueue_rows``; issue 28 item 5) instead of read back by id: the same items are
queued, nothing is read, 'sending' is written before the platform call and 'sent' after."""

from __future__ import annotations

import dataclasses

import pytest

from bot.delivery import send
from bot.delivery.outbox import Outbox, out_json
from bot.store import Store
from channels.base import MediaItem, OutboundMessage
from tests.unit.delivery.memory import ScriptedChannel

pytestmark = pytest.mark.timeout(10)

OUT = OutboundMessage(
    chat_id="42",
    text="hé",
    thread_id="3",
    media=[MediaItem(kind="image", target="/x.png", name="x.png")],
    api={"tool_calls": [{"id": "c", "args": (1, 2)}]},
)


@pytest.fixture
def store():
    s = Store(":memory:")
    yield s
    s.close()


def a_turn(store: Store, text: str = "m1") -> list:
    iid = store.add_inbound("telegram", "default", "42", text, "k", {"text": "hi"})
    return store.commit_turn_rows(
        "k", "t", [], inbound_id=iid, outbound=[out_json(OUT)], channel="telegram"
    )


def statements(store: Store) -> list[str]:
    seen: list[str] = []
    store.db.set_trace_callback(seen.append)
    return seen


async def test_the_rows_are_sent_without_being_read_back(store):
    ch = ScriptedChannel()
    box = Outbox(store, {"telegram": ch})
    box.start(recover=False)
    rows = a_turn(store)
    seen = statements(store)
    assert await send.deliver_rows(box, rows) == ["sent"]
    await box.stop(grace=1)
    # the trace shows the bound values: 'sending' before the platform call, 'sent' after
    assert [s.split(",")[0] for s in seen] == [
        "UPDATE outbox SET state='sending'",
        "UPDATE outbox SET state='sent'",
    ]
    assert not [s for s in seen if s.startswith("SELECT")]
    assert store.outbox_rows([rows[0].id])[0].state == "sent"
    assert ch.sent[0].text == "hé" and ch.sent[0].idempotency_key == rows[0].nonce


async def test_an_item_is_built_with_its_nonce_and_sent_as_built(store):
    """The row's nonce is set once, when the item is made from the row (the message is the
    item's own), not copied into a new message at every attempt."""
    ch = ScriptedChannel()
    box = Outbox(store, {"telegram": ch})
    (item,) = box.enqueue_rows(a_turn(store))
    assert item.out.idempotency_key == item.nonce != ""
    box.start(recover=False)
    assert await Outbox.first_attempt([item]) == ["sent"]
    await box.stop(grace=1)
    assert ch.sent == [item.out]


async def test_the_items_are_those_enqueue_reads_back(store):
    """Twin: ``enqueue(ids)`` (a scheduled turn's path, reading the rows) queues the same
    message, nonce, kind and times."""
    box = Outbox(store, {"telegram": ScriptedChannel()})
    (by_row,) = box.enqueue_rows(a_turn(store, "m1"))
    (row2,) = a_turn(store, "m2")
    (by_id,) = box.enqueue([row2.id])
    assert by_row.out == dataclasses.replace(by_id.out, idempotency_key=by_row.nonce)
    assert by_row.out.api == {"tool_calls": [{"id": "c", "args": [1, 2]}]}  # as stored (JSON)
    assert by_row.out.media == OUT.media
    assert (by_row.kind, by_row.channel, by_row.attempts) == (by_id.kind, by_id.channel, 0)
    assert by_id.nonce == row2.nonce and by_id.created == row2.created
    await box.stop(grace=0.1)


async def test_a_known_row_is_not_queued_twice(store):
    box = Outbox(store, {"telegram": ScriptedChannel()})
    rows = a_turn(store)
    assert len(box.enqueue_rows(rows)) == 1
    assert box.enqueue_rows(rows) == [] and box.pending() == 1
    assert await send.deliver_rows(box, []) == []
    await box.stop(grace=0.1)
