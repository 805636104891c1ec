"""The ledger and dedupe table, the mail cursor, and the per-route rate window."""

from __future__ import annotations

from bot.store import Store
from bot.store.triggers import DEDUPE_SECONDS, DONE_KEY
from bot.triggers.web import Window


def test_a_delivery_id_is_a_duplicate_for_7_days_then_new_again():
    s = Store(":memory:")
    assert s.trigger_accept("gh", "d1", {"body": "x"}, now=1000.0)
    assert s.trigger_accept("gh", "d1", {}, now=2000.0) is None
    assert s.trigger_accept("other", "d1", {}, now=2000.0)  # per route
    assert s.trigger_accept("gh", "", {}, now=2000.0)  # no id: never a duplicate
    assert s.trigger_accept("gh", "", {}, now=2000.0)
    assert s.trigger_accept("gh", "d1", {}, now=1000.0 + DEDUPE_SECONDS + 1)


def test_an_event_whose_turn_was_committed_is_closed_not_rerun():
    s = Store(":memory:")
    a = s.trigger_accept("gh", "a", {})
    b = s.trigger_accept("gh", "b", {})
    s.put(DONE_KEY + a, "ran")  # written by the turn's commit
    assert [r["id"] for r in s.trigger_pending()] == [b]
    assert {r["id"]: r["status"] for r in s.trigger_log()} == {a: "done", b: "pending"}


def test_mail_cursor_moves_with_each_message_and_never_back():
    s = Store(":memory:")
    s.mail_set_cursor("inbox", 7, 10)
    assert s.mail_take("inbox", 7, 11, {"mail": "m"})
    assert s.mail_take("inbox", 7, 11, {"mail": "m"}) is None  # never twice
    assert s.mail_take("inbox", 7, 12, None, "skipped (from_allow)") is None
    assert s.mail_cursor("inbox") == (7, 12)
    verdicts = [r["verdict"] for r in s.trigger_log("mail:inbox")]
    assert verdicts == ["skipped (from_allow)", "accepted"]


def test_window_allows_60_a_minute_per_route():
    w = Window()
    assert all(w.allow("a", 100.0 + i * 0.1) for i in range(60))
    assert not w.allow("a", 106.5)
    assert w.allow("b", 106.5)  # its own window
    assert w.allow("a", 170.0)  # the window slid


def test_a_flood_keeps_the_route_closed_and_the_window_small():
    w = Window()
    assert all(w.allow("a", 100.0 + i * 0.001) for i in range(60))
    flood = [w.allow("a", 101.0 + i * 0.0001) for i in range(100_000)]
    assert not any(flood)  # every request counts, refused ones too
    assert len(w.times["a"]) <= w.limit  # a flood costs no memory beyond the limit
    assert not w.allow("a", 160.0)  # the flood's last minute is not over
    assert w.allow("a", 112.0 + 60.0)  # it is: the route opens again
