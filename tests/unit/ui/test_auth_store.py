"""The UI's login codes and browser sessions in the store (SPEC §16.2): hashes only, single
use, 120 s, at most five unused codes, idle and max expiry, revoke one and all."""

from __future__ import annotations

from bot.store import Store
from bot.store.ui import CODE_TTL, digest


def test_code_is_single_use_and_stored_only_as_its_hash(tmp_path):
    store = Store(tmp_path / "s.sqlite3")
    store.add_login_code("abc", now=100.0)
    dump = "\n".join(store.db.iterdump())
    assert "abc" not in dump.replace(digest("abc"), "") and digest("abc") in dump
    assert store.take_login_code("abc", now=101.0)
    assert not store.take_login_code("abc", now=102.0)  # used
    assert not store.take_login_code("nope", now=102.0)  # unknown


def test_code_expires_after_120_seconds():
    store = Store(":memory:")
    store.add_login_code("abc", now=100.0)
    assert not store.take_login_code("abc", now=100.0 + CODE_TTL)
    store.add_login_code("def", now=100.0)
    assert store.take_login_code("def", now=100.0 + CODE_TTL - 1)


def test_a_sixth_code_evicts_the_oldest():
    store = Store(":memory:")
    for i in range(6):
        store.add_login_code(f"c{i}", now=100.0 + i)
    assert store.login_codes_pending(now=106.0) == 5
    assert not store.take_login_code("c0", now=106.0)
    assert all(store.take_login_code(f"c{i}", now=106.0) for i in range(1, 6))


def test_session_ends_when_idle_or_too_old_and_on_revoke(tmp_path):
    store = Store(tmp_path / "s.sqlite3")
    sid = store.add_ui_session("cookie-1", "csrf-1", "UA", now=0.0)
    dump = "\n".join(store.db.iterdump())
    assert "cookie-1" not in dump and "csrf-1" not in dump
    s = store.ui_session("cookie-1", idle=10, max_age=100, now=9.0)
    assert s is not None and s.id == sid and s.csrf_hash == digest("csrf-1")
    assert store.ui_session("cookie-1", idle=10, max_age=100, now=18.0) is not None  # touched at 9
    assert store.ui_session("cookie-1", idle=10, max_age=100, now=28.5) is None  # idle
    store.add_ui_session("cookie-2", "x", "UA", now=0.0)
    for t in range(5, 100, 5):
        assert store.ui_session("cookie-2", idle=10, max_age=100, now=float(t))
    assert store.ui_session("cookie-2", idle=10, max_age=100, now=100.0) is None  # max
    a = store.add_ui_session("a", "x", "UA", now=0.0)
    store.add_ui_session("b", "x", "UA", now=1.0)
    assert [s.id for s in store.ui_sessions(idle=10, max_age=100, now=2.0)][-1] == a
    assert store.end_ui_session(a) and not store.end_ui_session(a)
    assert store.ui_session("a", idle=10, max_age=100, now=2.0) is None
    store.add_login_code("code", now=2.0)
    assert store.revoke_ui_all() == (1, 1)
    assert store.ui_session("b", idle=10, max_age=100, now=2.0) is None
