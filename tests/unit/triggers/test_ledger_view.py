"""The event ledger as ``chela hooks log`` and the Control UI's Inbox list it (one query):
newest first, a page older than an event, each row's summary, header names, outcome and
state word; a notice per ledger write naming only the event's id."""

from __future__ import annotations

import pytest

from bot.store import Store
from bot.store.triggers import event_state, outcome

GITHUB = {
    "body": '{\n  "action": "opened"\n}',
    "event": "push",
    "headers": "content-type: application/json\nx-github-event: push",
}
MAIL = "From: a@b.test\nTo: me@b.test\nDate: today\nSubject: <img src=x onerror=alert(1)>\n\nhi"


@pytest.fixture
def notices():
    return []


@pytest.fixture
def store(notices):
    return Store(":memory:", publish=lambda name, data: notices.append((name, data)))


def test_rows_newest_first_with_what_the_listing_shows(store):
    first = store.trigger_accept("gh", "d-1", GITHUB, now=100.0)
    store.trigger_finish(first, "delivered to telegram:42")
    store.trigger_accept("gh", "d-1", GITHUB, now=101.0)
    store.mail_take("inbox", 1, 7, {"mail": MAIL})
    rows = store.trigger_log()
    assert [(r["source"], r["verdict"]) for r in rows] == [
        ("mail:inbox", "accepted"),
        ("gh", "duplicate"),
        ("gh", "accepted"),
    ]
    mail, dup, hook = rows
    assert mail["kind"] == "mail" and mail["summary"] == "<img src=x onerror=alert(1)>"
    assert mail["outcome"] == "accepted (pending)" and mail["state"] == "waiting"
    assert dup["state"] == "duplicate" and dup["excerpt"] == "" and dup["headers"] == []
    assert hook["kind"] == "hook" and hook["event"] == "push"
    assert hook["headers"] == ["content-type", "x-github-event"]
    assert hook["summary"] == 'push · { "action": "opened" }'
    assert hook["outcome"] == "accepted (delivered to telegram:42)" and hook["state"] == "done"
    assert all(r["payload"] == {} for r in rows)


def test_a_page_before_an_event_and_one_source(store):
    ids = [store.trigger_accept("gh", f"d-{n}", GITHUB, now=100.0 + n) for n in range(5)]
    store.trigger_refused("other", "unauthorized")
    page = store.trigger_log("gh", limit=2, before=ids[3])
    assert [r["id"] for r in page] == [ids[2], ids[1]]
    assert [r["id"] for r in store.trigger_log("gh", before=ids[0])] == []
    assert store.trigger_log(before="evt_unknown") == []
    assert [r["source"] for r in store.trigger_log("other")] == ["other"]


def test_same_second_events_page_without_loss(store):
    """Ties on the time are broken by insertion order: a page never skips or repeats one."""
    ids = [store.trigger_accept("gh", f"d-{n}", GITHUB, now=100.0) for n in range(4)]
    seen, before = [], None
    while page := store.trigger_log(limit=1, before=before):
        seen.append(page[0]["id"])
        before = page[0]["id"]
    assert seen == ids[::-1]


def test_summary_is_one_printable_line(store):
    store.trigger_accept("t", "", {"body": "line one\n\x1b[31mred\x1b[0m\t" + "x" * 500})
    (row,) = store.trigger_log()
    assert "\n" not in row["summary"] and "\x1b" not in row["summary"]
    assert row["summary"].startswith("line one ?[31mred?[0m") and len(row["summary"]) == 120
    assert row["excerpt"].startswith("line one\n\x1b[31m")  # the details show it as stored


def test_the_excerpt_is_the_start_of_the_body_only(store):
    store.trigger_accept("t", "", {"body": "a" * 1999 + "b" + "SECRET-TAIL" * 1000})
    (row,) = store.trigger_log()
    assert row["excerpt"] == "a" * 1999 + "b"


@pytest.mark.parametrize(
    ("row", "state", "text"),
    [
        ({"verdict": "unauthorized"}, "refused", "unauthorized"),
        ({"verdict": "too large"}, "refused", "too large"),
        ({"verdict": "rate limited"}, "refused", "rate limited"),
        ({"verdict": "duplicate"}, "duplicate", "duplicate"),
        ({"verdict": "skipped (from_allow)"}, "skipped", "skipped (from_allow)"),
        ({"verdict": "accepted", "status": "pending"}, "waiting", "accepted (pending)"),
        ({"verdict": "accepted", "status": "kept"}, "waiting", "accepted (kept)"),
        (
            {"verdict": "accepted", "status": "done", "result": "silent (NO_REPLY)"},
            "done",
            "accepted (silent (NO_REPLY))",
        ),
        (
            {"verdict": "accepted", "status": "done", "result": "failed: model_error"},
            "failed",
            "accepted (failed: model_error)",
        ),
        (
            {"verdict": "accepted", "status": "done", "result": "queued (telegram:42)"},
            "note",
            "accepted (queued (telegram:42))",
        ),
    ],
)
def test_outcome_and_state_words(row, state, text):
    assert event_state(row) == state
    assert outcome(row) == text


def test_each_ledger_write_is_a_notice_with_the_id_only(store, notices):
    a = store.trigger_accept("gh", "d-1", GITHUB)
    store.trigger_accept("gh", "d-1", GITHUB)
    store.trigger_refused("gh", "too large")
    store.trigger_finish(a, "silent (NO_REPLY)")
    store.mail_take("inbox", 1, 3, None, "skipped (from_allow)")
    assert [name for name, _ in notices] == ["trigger.event"] * 5
    assert all(set(data) == {"id"} for _, data in notices)
    assert notices[0][1]["id"] == a == notices[3][1]["id"]
    # the twin: a mail the cursor is already past writes nothing and tells no one
    assert store.mail_take("inbox", 1, 3, None, "skipped (from_allow)") is None
    assert len(notices) == 5
