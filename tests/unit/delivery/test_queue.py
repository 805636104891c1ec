"""The outbox in memory (bot/delivery/outbox.py): Store(":memory:"), a scripted channel, retries
1 ms apart.  Each row's life — sent, retried, refused, given up, recovered, adopted — and what
happens when the state database cannot be written."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest

from bot.delivery import outbox as outbox_mod
from bot.delivery.outbox import Outbox, StorageAlarm, out_from_json, out_json
from bot.store import Store
from channels.base import MediaItem, OutboundMessage
from tests.unit.delivery.memory import ScriptedChannel, disk_full, refused, until


# a regression that leaves a message unsettled fails in seconds, not at the suite's 180 s
pytestmark = pytest.mark.timeout(10)


@pytest.fixture
def store():
    s = Store(":memory:")
    yield s
    s.close()


@pytest.fixture
def ch():
    return ScriptedChannel()


@pytest.fixture
async def box(store, ch):
    b = Outbox(store, {"telegram": ch}, retry_initial=0.001, retry_max=0.002)
    yield b
    await b.stop(grace=0.1)


def row(store, row_id):
    return store.db.execute(
        "SELECT state, sent_ids, error, attempts FROM outbox WHERE id=?", (row_id,)
    ).fetchone()


def msg(text="hi", chat="42", **kw):
    return OutboundMessage(chat_id=chat, text=text, **kw)


def stored(store, *texts, chat="42"):
    return store.add_outbox("telegram", [out_json(msg(t, chat)) for t in texts], kind="reply")


# ----------------------------------------------------------------------------- outcomes
async def test_a_message_is_stored_sent_with_its_nonce_and_recorded(box, store, ch):
    box.start(recover=False)
    item = box.submit("telegram", msg("hello"), kind="message")
    assert await Outbox.first_attempt([item]) == ["sent"]
    assert await Outbox.final([item]) == ["sent"]
    assert [m.text for m in ch.sent] == ["hello"]
    assert ch.sent[0].idempotency_key == item.nonce != ""
    state, sent_ids, error, attempts = row(store, item.id)
    assert (state, sent_ids, error, attempts) == ("sent", '["1"]', None, 1)
    assert box.pending() == 0


async def test_a_failed_send_is_retried_and_holds_the_chat_but_not_others(box, store, ch):
    ch.script = [ConnectionResetError("reset"), ["7"], ["8"], ["9"]]
    box.start(recover=False)
    first = box.submit("telegram", msg("one"), kind="reply")
    second = box.submit("telegram", msg("two"), kind="reply")
    assert await Outbox.first_attempt([first, second]) == ["queued", "queued"]
    assert await Outbox.final([first, second]) == ["sent", "sent"]
    assert [m.text for m in ch.sent] == ["one", "one", "two"]
    assert row(store, first.id)[0] == "sent" and row(store, first.id)[3] == 2


async def test_a_message_queued_behind_a_retry_reports_queued_at_once(box, ch):
    ch.script = [ConnectionResetError("reset")] * 3
    box.start(recover=False)
    first = box.submit("telegram", msg("one"), kind="reply")
    assert await Outbox.first_attempt([first]) == ["queued"]
    later = box.submit("telegram", msg("two"), kind="reply")
    assert later.first.done() and later.first.result() == "queued"
    assert await Outbox.final([first, later]) == ["sent", "sent"]


async def test_the_platforms_retry_after_is_named(box, ch, caplog):
    err = refused("Too Many Requests")
    err.retry_after = 0.001  # type: ignore[attr-defined]
    ch.script = [err]
    box.start(recover=False)
    with caplog.at_level(logging.INFO, logger="chela.outbox"):
        item = box.submit("telegram", msg(), kind="reply")
        assert await Outbox.final([item]) == ["sent"]
    assert "retrying after 0.001s" in caplog.text


@pytest.mark.parametrize(
    ("proactive", "error", "outcome"),
    [
        (True, refused("Forbidden: bot was blocked by the user"), "failed"),
        (True, refused("Bad Gateway"), "sent"),  # retried, then the script runs out: sent
        (False, refused("Bad Gateway"), "failed"),  # a request/response channel: no retry
    ],
)
async def test_refused_for_good_or_not_proactive_fails_once(store, proactive, error, outcome):
    ch = ScriptedChannel(proactive=proactive)
    ch.script = [error]
    box = Outbox(store, {"telegram": ch}, retry_initial=0.001)
    box.start(recover=False)
    item = box.submit("telegram", msg(), kind="reply")
    assert await Outbox.final([item]) == [outcome]
    state, _ids, err, _n = row(store, item.id)
    assert state == outcome
    assert (err == str(error)) is (outcome == "failed")
    await box.stop(grace=0.1)


async def test_a_message_older_than_max_age_is_given_up_unsent(store, ch):
    box = Outbox(store, {"telegram": ch}, max_age=-1)
    box.start(recover=False)
    item = box.submit("telegram", msg(), kind="heartbeat")
    assert await Outbox.final([item]) == ["failed"]
    assert ch.sent == []
    assert row(store, item.id)[2] == "not delivered within delivery.max_age"


async def test_a_message_to_a_channel_not_configured_fails(box, store, ch):
    box.start(recover=False)
    item = box.submit("slack", msg(), kind="message")
    assert await Outbox.final([item]) == ["failed"]
    assert ch.sent == [] and row(store, item.id)[2] == "channel not configured"


# ------------------------------------------------------------------------ order and ids
async def test_rows_queued_out_of_order_go_out_in_id_order(box, store, ch):
    a, b, c = stored(store, "a", "b", "c")
    assert [i.id for i in box.enqueue([c])] == [c]
    box.enqueue([a, b])
    box.enqueue([a])  # already known: not queued twice
    assert box.pending() == 3
    box.start(recover=False)
    await until(lambda: box.pending() == 0)
    assert [m.text for m in ch.sent] == ["a", "b", "c"]


async def test_an_older_row_never_jumps_in_front_of_a_send_in_flight(box, store, ch):
    a, b = stored(store, "a", "b")
    ch.gate = asyncio.Event()
    box.start(recover=False)
    box.enqueue([b])
    await until(lambda: len(ch.sent) == 1, "b in flight")
    box.enqueue([a])
    ch.gate.set()
    await until(lambda: box.pending() == 0)
    assert [m.text for m in ch.sent] == ["b", "a"]


async def test_enqueue_skips_rows_already_done(box, store):
    (a,) = stored(store, "a")
    store.outbox_done(a, "sent", sent_ids=["1"])
    assert box.enqueue([a]) == []


def test_an_outbound_message_survives_its_json_and_unknown_keys_are_dropped():
    out = msg("pic", media=[MediaItem(kind="image", target="/x.png", name="x.png")])
    data = out_json(out)
    assert out_from_json(data) == out
    assert out_from_json({**data, "from_a_newer_version": 1}) == out


# -------------------------------------------------------------------- recovery, adoption
async def test_start_recovers_rows_left_unsent_and_prunes_old_done_rows(store, ch, caplog):
    _a, b, old = stored(store, "a", "b", "old")
    store.outbox_sending(b)  # in flight at the crash
    store.outbox_done(old, "sent", sent_ids=["1"])
    store.db.execute("UPDATE outbox SET updated=0 WHERE id=?", (old,))
    box = Outbox(store, {"telegram": ch})
    with caplog.at_level(logging.INFO, logger="chela.outbox"):
        assert box.start(recover=True) == 2
    assert "2 message(s) left unsent by the last run, 1 of them possibly sent" in caplog.text
    await until(lambda: len(ch.sent) == 2)
    assert [m.text for m in ch.sent] == ["a", "b"]
    assert row(store, old) is None
    await box.stop(grace=0.1)


async def test_start_without_recover_leaves_stored_rows_alone(store, ch):
    stored(store, "a")
    box = Outbox(store, {"telegram": ch})
    assert box.start(recover=False) == 0
    assert box.pending() == 0
    await box.stop(grace=0.1)


async def test_an_unreadable_outbox_at_start_is_logged_not_raised(store, ch, caplog):
    def broken():
        raise disk_full()

    store.outbox_pending = broken
    box = Outbox(store, {"telegram": ch})
    assert box.start(recover=True) == 0
    assert "cannot read the outbox" in caplog.text
    await box.stop(grace=0.1)


async def test_rows_another_process_left_are_adopted_once_idle(store, ch, monkeypatch):
    monkeypatch.setattr(outbox_mod, "ADOPT_EVERY", 0.001)
    monkeypatch.setattr(outbox_mod, "ADOPT_IDLE", 3600.0)
    box = Outbox(store, {"telegram": ch})
    box.start(recover=True)
    (fresh,) = stored(store, "fresh")  # just written by a one-shot command: not ours yet
    (left,) = stored(store, "left")
    store.db.execute("UPDATE outbox SET updated=? WHERE id=?", (time.time() - 7200, left))
    await until(lambda: len(ch.sent) == 1, "the idle row adopted")
    for _ in range(20):
        await asyncio.sleep(0.001)
    assert [m.text for m in ch.sent] == ["left"]
    assert row(store, fresh)[0] == "queued"
    await box.stop(grace=0.1)


async def test_the_adopter_survives_an_unreadable_outbox(store, ch, monkeypatch):
    monkeypatch.setattr(outbox_mod, "ADOPT_EVERY", 0.001)
    monkeypatch.setattr(outbox_mod, "ADOPT_IDLE", -1.0)
    reads = []
    real = store.outbox_pending

    def flaky():
        reads.append(1)
        if len(reads) <= 3:  # the start's read and two of the adopter's fail
            raise disk_full()
        return real()

    store.outbox_pending = flaky
    box = Outbox(store, {"telegram": ch})
    box.start(recover=True)
    stored(store, "late")
    await until(lambda: len(ch.sent) == 1)
    assert len(reads) >= 4
    await box.stop(grace=0.1)


# --------------------------------------------------------------------- stop and workers
async def test_stop_cancels_a_hanging_send_and_the_row_stays_for_the_next_run(store, ch):
    ch.gate = asyncio.Event()  # never set: the platform hangs
    box = Outbox(store, {"telegram": ch})
    box.start(recover=False)
    item = box.submit("telegram", msg(), kind="reply")
    await until(lambda: len(ch.sent) == 1)
    await box.stop(grace=0.01)
    assert row(store, item.id)[0] == "sending"
    assert not item.done.done()
    box.submit("telegram", msg("after stop"), kind="reply")
    assert len(ch.sent) == 1  # no worker starts once stopping


async def test_a_worker_cancelled_from_outside_is_replaced(box, ch):
    ch.gate = asyncio.Event()
    box.start(recover=False)
    item = box.submit("telegram", msg(), kind="reply")
    await until(lambda: len(ch.sent) == 1)
    worker = next(iter(box._workers.values()))
    worker.cancel()
    await until(worker.done)
    ch.gate.set()
    assert await Outbox.final([item]) == ["sent"]
    assert len(ch.sent) == 2  # the interrupted send is tried again


# ----------------------------------------------------------------------- a full disk
async def test_a_message_that_cannot_be_stored_is_sent_from_memory(box, store, ch, caplog):
    real = store.add_outbox
    store.add_outbox = lambda *a, **kw: (_ for _ in ()).throw(disk_full())
    box.start(recover=False)
    item = box.submit("telegram", msg("from memory"), kind="message")
    assert item.id is None and box.storage.down
    assert await Outbox.final([item]) == ["sent"]
    assert [m.text for m in ch.sent] == ["from memory"]
    assert "disk full: " in caplog.text  # the store's alarm says it, naming the state dir
    store.add_outbox = real
    again = box.submit("telegram", msg("stored"), kind="message")
    assert again.id is not None and not box.storage.down


async def test_a_store_bug_on_submit_is_logged_and_the_message_still_sent(box, store, ch, caplog):
    store.add_outbox = lambda *a, **kw: (_ for _ in ()).throw(ValueError("bug"))
    box.start(recover=False)
    item = box.submit("telegram", msg(), kind="message")
    assert await Outbox.final([item]) == ["sent"]
    assert not box.storage.down
    assert "cannot store a message message for telegram" in caplog.text


@pytest.mark.parametrize("error", [disk_full(), RuntimeError("locked")])
async def test_nothing_goes_out_without_its_sending_mark(box, store, ch, error):
    real = store.outbox_sending
    failures = [error, error]
    marks: list[tuple[str, int]] = []  # (outcome, sends made before this mark)

    def mark(row_id):
        if failures:
            marks.append(("refused", len(ch.sent)))
            raise failures.pop()
        marks.append(("written", len(ch.sent)))
        real(row_id)

    store.outbox_sending = mark
    box.start(recover=False)
    item = box.submit("telegram", msg(), kind="reply")
    assert await Outbox.first_attempt([item]) == ["queued"]
    assert await Outbox.final([item]) == ["sent"]
    assert marks == [("refused", 0), ("refused", 0), ("written", 0)]
    assert len(ch.sent) == 1 and item.attempts == 1
    assert row(store, item.id)[0] == "sent"


async def test_an_outcome_that_cannot_be_written_is_kept_and_written_later(box, store, ch):
    real = store.outbox_done
    failures = 3

    def done(row_id, state, **kw):
        nonlocal failures
        if failures:
            failures -= 1
            raise disk_full()
        real(row_id, state, **kw)

    store.outbox_done = done
    box.start(recover=False)
    item = box.submit("telegram", msg(), kind="reply")
    assert await Outbox.final([item]) == ["sent"]
    assert row(store, item.id)[0] == "sending"  # not written yet, and not sent again
    await until(lambda: row(store, item.id)[0] == "sent", "the outcome written")
    assert len(ch.sent) == 1 and box._unsaved == {}


async def test_stop_writes_the_outcomes_still_unsaved(store, ch):
    box = Outbox(store, {"telegram": ch}, retry_initial=3600.0)
    real = store.outbox_done
    store.outbox_done = lambda *a, **kw: (_ for _ in ()).throw(disk_full())
    box.start(recover=False)
    item = box.submit("telegram", msg(), kind="reply")
    assert await Outbox.final([item]) == ["sent"]
    store.outbox_done = real
    await box.stop(grace=0.01)
    assert row(store, item.id)[0] == "sent"


def test_the_storage_alarm_says_each_change_once(caplog):
    alarm = StorageAlarm()
    with caplog.at_level(logging.DEBUG, logger="chela.outbox"):
        alarm.ok()
        alarm.failed(disk_full(), "a")
        alarm.failed(disk_full(), "b")
        alarm.ok()
        alarm.ok()
    levels = [(r.levelname, r.getMessage().split(" (")[0]) for r in caplog.records]
    assert levels == [
        ("ERROR", "cannot write the state database"),
        ("DEBUG", "state database still not writable"),
        ("WARNING", "the state database is writable again: catching up"),
    ]
