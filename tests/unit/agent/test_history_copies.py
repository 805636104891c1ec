"""A turn's history (SPEC §10) comes from the decoded view the compactor keeps between turns;
the messages a turn sends are copies of the view's, so a turn that edits a message on its
way to the provider cannot change the next turn's history, and the stored token counts are
known for exactly the messages sent (none is counted again), with and without a summary."""

from __future__ import annotations

from bot.agent.request import TurnRequest
from bot.store import Store
from tests.unit.agent.test_compaction_plan import KEY, SYSTEM, compactor, config, fill


def _setup(tmp_path, turns: int = 6):
    store = Store(tmp_path / "state.db")
    fill(store, turns)
    return compactor(config(tmp_path), store), store


async def _history(comp, text: str = "next question"):
    req = TurnRequest(session_key=KEY, user_text=text)
    new = [{"role": "user", "content": text}]
    return await comp.history_for_turn(req, SYSTEM, None, None, None, new)  # type: ignore[arg-type]


async def test_a_turn_that_edits_its_history_does_not_change_the_next_turns(tmp_path):
    comp, store = _setup(tmp_path)
    first, _ = await _history(comp)
    stored = [r.message for r in store.window(KEY, limit=1000)]
    assert first == stored
    for m in first:
        m["content"] = "rewritten on the way to the provider"
    again, _ = await _history(comp)
    assert again == stored


async def test_the_stored_counts_are_known_for_the_messages_sent(tmp_path):
    comp, store = _setup(tmp_path)
    msgs, fit = await _history(comp)
    assert [fit.counts.get(id(m)) for m in msgs] == [
        r.tokens for r in store.window(KEY, limit=1000)
    ]


async def test_with_a_summary_its_count_is_known_too(tmp_path):
    comp, store = _setup(tmp_path, turns=8)
    rows = store.window(KEY, limit=1000)
    store.save_summary(KEY, rows[5].id, "earlier: the fox", 7, source="fallback", reason="t")
    msgs, fit = await _history(comp)
    kept = [r for r in store.window(KEY, limit=1000)]
    assert msgs[0]["content"].endswith("earlier: the fox") and msgs[1:] == [r.message for r in kept]
    assert [fit.counts.get(id(m)) for m in msgs] == [7 + 30, *(r.tokens for r in kept)]
    msgs[1]["content"] = "edited"
    again, _ = await _history(comp)
    assert again[1:] == [r.message for r in kept]
