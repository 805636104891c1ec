"""The decoded view's per-turn peek (bot.agent.compaction.window) as Counting.view calls it:
the session's epoch and summary handed down, the rows it already holds not decoded again.
Its rows must stay exactly what the store's window reads, including text-mode tool results
(user messages that are not the start of a turn) at the edge of the peek."""

from __future__ import annotations

from bot.agent.compaction.window import WindowCache
from bot.store import Store

KEY = "agent:main:main"


def text_mode_turn(t: int) -> list[dict]:
    """Turn ``t``: in text mode a tool result comes back as a user message."""
    user = {"role": "user", "content": f"question {t}"}
    if t % 3:
        return [user, {"role": "assistant", "content": f"answer {t}"}]
    return [
        user,
        {"role": "assistant", "content": '<tool_call>{"name": "read"}</tool_call>'},
        {"role": "user", "content": f"<tool_result>file {t}</tool_result>"},
        {"role": "assistant", "content": f"answer {t}"},
    ]


def _same(store: Store, cache: WindowCache) -> None:
    epoch = store.session(KEY)["epoch"]
    summary = store.summary(KEY, epoch=epoch)
    got = cache.rows(KEY, summary, epoch)
    want = store.window(KEY, limit=cache.limit)
    assert [(r.id, r.role, r.tokens, r.message) for r in got] == [
        (r.id, r.role, r.tokens, r.message) for r in want
    ]


def test_the_peek_keeps_the_view_exact(tmp_path):
    store = Store(tmp_path / "state.db")
    cache = WindowCache(store, limit=9, peek=5)
    _same(store, cache)
    for t in range(40):
        store.commit_turn(KEY, f"t{t}", text_mode_turn(t))
        _same(store, cache)
    assert cache.full_reads < 20  # most turns continued the cached view
    rows = store.window(KEY, limit=50)
    store.save_summary(KEY, rows[2].id, "s", 5, source="fallback", reason="test")
    _same(store, cache)
    store.reset_session(KEY)
    _same(store, cache)
    store.commit_turn(KEY, "t99", text_mode_turn(99))
    _same(store, cache)


def test_rows_held_are_not_decoded_again(tmp_path):
    store = Store(tmp_path / "state.db")
    for t in range(4):
        store.commit_turn(KEY, f"t{t}", text_mode_turn(t))
    peek = store.window(KEY, limit=16)
    held = peek[-3].id
    light = store.window(KEY, limit=16, known=held)
    assert [(r.id, r.role, r.tokens) for r in light] == [(r.id, r.role, r.tokens) for r in peek]
    assert all(r.message == {} for r in light if r.id <= held)
    assert [r.message for r in light if r.id > held] == [r.message for r in peek[-2:]]
