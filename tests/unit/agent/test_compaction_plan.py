"""The per-turn compaction plan (SPEC §10): the window and tokenizer of the session's model
(§17.2), stored counts instead of re-encoding, and the decoded view kept between turns."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.agent.compaction import Compactor, choose_cut, message_counter
from bot.agent.compaction.window import WindowCache
from bot.agent.request import TurnRequest
from bot.config import parse_config
from bot.model.choice import CHOICE, Choice
from bot.store import Store, estimate_tokens

KEY = "agent:main:main"
SYSTEM = "You are a test assistant.\n" + "rule " * 200


def config(tmp_path: Path, model: str = "openai/fake-model", **agent):
    base = {
        "workspace": str(tmp_path / "ws"),
        "state_dir": str(tmp_path / "state"),
        "model": model,
        "api_base": "http://127.0.0.1:9/v1" if model.startswith("openai/") else "",
        "history_limit": 1000,
    }
    return parse_config({"agent": base | agent, "heartbeat": {"every": "0m"}})


def fixed_turn(t: int) -> list[dict]:
    """Turn ``t`` of a fixed history: some with a tool call and its result."""
    user = {"role": "user", "content": f"question {t}: " + "the fox jumps " * (5 + t % 17)}
    if t % 4 == 1:
        call = {"id": f"c{t}", "type": "function", "function": {"name": "read", "arguments": "{}"}}
        return [
            user,
            {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{t}", "content": "file text " * (t % 9 + 1)},
            {"role": "assistant", "content": f"answer {t} " + "done " * (t % 13)},
        ]
    return [user, {"role": "assistant", "content": f"answer {t}: " + "words " * (3 + t % 11)}]


def fill(store: Store, turns: int, start: int = 0) -> None:
    for t in range(start, start + turns):
        store.commit_turn(KEY, f"t{t}", fixed_turn(t))


class _NoModel:
    async def complete(self, *a, **k):
        raise RuntimeError("no model here")  # the summary is built without the model


def compactor(cfg, store: Store, main_llm: object = None) -> Compactor:
    return Compactor(cfg, store, llm_factory=lambda *a, **k: _NoModel(), main_llm=main_llm)


# ----------------------------------------------------------------- the decision, unchanged
async def test_the_plan_on_stored_counts_cuts_where_a_full_recount_would(tmp_path):
    """A fixed history of 300+ messages and a window that makes the turn compact: the
    messages summarised are the ones a plan counting every message anew would drop (and
    the same as before this change: upto_id 252)."""
    cfg = config(tmp_path, compaction={"context_window": 8000, "keep_recent_tokens": 2000})
    store = Store(tmp_path / "state.db", token_counter=message_counter(cfg))
    fill(store, 120)
    rows = store.window(KEY, limit=2000)
    assert len(rows) >= 300
    comp = compactor(cfg, store)
    b = comp.budget(SYSTEM, None)
    recounted = [type(r)(r.id, r.role, r.message, estimate_tokens(r.message)) for r in rows]
    expected = recounted[choose_cut(recounted, b.keep_tokens, b.keep_messages) - 1].id
    req = TurnRequest(session_key=KEY, user_text="the next question", trust="guest")
    new = [{"role": "user", "content": req.user_text}]
    hist, _ = await comp.history_for_turn(req, SYSTEM, None, None, None, new)  # type: ignore[arg-type]
    summary = store.summary(KEY)
    assert summary is not None and summary["source"] == "fallback"
    assert summary["upto_id"] == expected == 252
    assert [m for m in hist[1:]] == [r.message for r in rows if r.id > expected]


# --------------------------------------------------------------------- the decoded view
def test_the_cached_view_is_what_the_store_reads(tmp_path):
    store = Store(tmp_path / "state.db")
    cache = WindowCache(store, limit=50, peek=6)

    def same() -> None:
        summary = store.summary(KEY)
        got = cache.rows(KEY, summary)
        want = store.window(KEY, limit=50)
        assert [(r.id, r.tokens, r.message) for r in got] == [
            (r.id, r.tokens, r.message) for r in want
        ]

    same()  # an empty session
    fill(store, 3)
    same()
    reads = cache.full_reads
    for t in range(3, 40):  # small turns: the peek finds them; the limit cuts the start
        fill(store, 1, start=t)
        same()
    assert cache.full_reads == reads  # never read whole again
    fill(store, 4, start=40)  # more new rows than the peek holds: read whole
    same()
    assert cache.full_reads == reads + 1
    rows = store.window(KEY, limit=50)
    store.save_summary(KEY, rows[10].id, "s", 5, source="fallback", reason="test", epoch=0)
    same()  # a compaction: a new summary, read whole
    store.reset_session(KEY)  # /new
    same()
    fill(store, 2, start=50)
    same()


# -------------------------------------------------------------- the session's model
def test_the_window_follows_the_model(tmp_path):
    small = {"model": "openai/small-model", "context_window": 4000}
    cfg = config(
        tmp_path,
        compaction={"context_window": 100_000},
        models={"small": small, "plain": "openai/unknown-model"},
        fallbacks=[{"model": "openai/backup-model", "context_window": 16_000}],
    )
    main = object()
    comp = compactor(cfg, Store(tmp_path / "state.db"), main_llm=main)
    assert comp.window() == 100_000  # agent.model: agent.compaction.context_window
    assert comp.window("openai/small-model") == 4000
    assert comp.window("openai/backup-model") == 16_000
    assert comp.window("openai/unknown-model") == 100_000  # unknown: the configured default
    token = CHOICE.set(Choice(main, "openai/small-model"))
    try:
        assert comp.session_model() == "openai/small-model"
        assert comp.budget(SYSTEM, None).window == 4000
    finally:
        CHOICE.reset(token)
    token = CHOICE.set(Choice(object(), "openai/small-model"))  # another client's choice
    try:
        assert comp.budget(SYSTEM, None).window == 100_000
    finally:
        CHOICE.reset(token)


def test_a_context_window_below_1000_is_refused(tmp_path):
    from bot.config import ConfigError

    with pytest.raises(ConfigError, match="context_window"):
        config(tmp_path, models={"s": {"model": "openai/s", "context_window": 500}})


async def test_estimated_counts_hold_for_every_model(tmp_path):
    """On the light path the count is the estimate, the same for any model: stored counts
    are used as they are, nothing is recounted."""
    cfg = config(tmp_path, models={"small": "openai/small-model"})
    store = Store(tmp_path / "state.db", token_counter=message_counter(cfg))
    fill(store, 10)
    comp = compactor(cfg, store)
    stored = store.window(KEY, limit=100)
    _, rows = comp.view(KEY, "openai/small-model")
    assert [r.tokens for r in rows] == [r.tokens for r in stored]
    assert comp._recounts == {}


async def test_another_tokenizer_recounts_each_stored_message_once(tmp_path):
    """With litellm counting, stored counts were made with agent.model's tokenizer: a
    session on another model gets each message recounted with its own (exact), once."""
    from bot.model import litellm_path

    await litellm_path.litellm()
    import litellm

    cfg = config(
        tmp_path, model="anthropic/claude-3-5-haiku-20241022", models={"g": "openai/gpt-4o"}
    )
    store = Store(tmp_path / "state.db", token_counter=message_counter(cfg))
    fill(store, 10)
    comp = compactor(cfg, store)
    stored = store.window(KEY, limit=100)
    _, own = comp.view(KEY, cfg.agent.model)
    assert [r.tokens for r in own] == [r.tokens for r in stored]  # stored counts, as is
    _, rows = comp.view(KEY, "openai/gpt-4o")
    assert [r.tokens for r in rows] == [
        int(litellm.token_counter(model="openai/gpt-4o", messages=[r.message])) for r in stored
    ]
    recounted = len(comp._recounts)
    assert recounted == len(stored)
    fill(store, 1, start=10)
    comp.view(KEY, "openai/gpt-4o")
    assert len(comp._recounts) == recounted + len(fixed_turn(10))  # only the new ones


def test_a_turn_that_edits_its_messages_does_not_change_the_next_turns(tmp_path):
    store = Store(tmp_path / "state.db")
    fill(store, 3)
    cache = WindowCache(store, limit=50)
    first = cache.rows(KEY, None)
    first[0].message["content"] = "rewritten on the way to the provider"
    assert cache.rows(KEY, None)[0].message == store.window(KEY, limit=50)[0].message


def test_the_summary_request_fits_the_summary_models_window(tmp_path):
    """A session on a model with a bigger window than agent.model's (which writes the
    summary): the summary request is sized for agent.model's window, not the session's."""
    big = {"model": "openai/big-model", "context_window": 200_000}
    cfg = config(tmp_path, compaction={"context_window": 8000}, models={"big": big})
    store = Store(tmp_path / "state.db", token_counter=message_counter(cfg))
    fill(store, 400)
    main = object()
    comp = compactor(cfg, store, main_llm=main)
    token = CHOICE.set(Choice(main, "openai/big-model"))
    try:
        b = comp.budget(SYSTEM, None)
        _, rows = comp.view(KEY)
        body = comp._summary_request("", rows, b, "")
    finally:
        CHOICE.reset(token)
    assert b.window == 200_000
    assert comp.count_text(body) + b.summary_cap <= 8000


def test_only_the_last_sessions_stay_decoded(tmp_path):
    store = Store(tmp_path / "state.db")
    keys = ["agent:main:a", "agent:main:b", "agent:main:c"]
    for k in keys:
        store.commit_turn(k, "t", fixed_turn(0))
    cache = WindowCache(store, limit=50, sessions=2)
    for k in keys:
        cache.rows(k, None)
    assert cache.full_reads == 3
    cache.rows("agent:main:c", None)  # still held: no whole read
    assert cache.full_reads == 3
    assert [r.message for r in cache.rows("agent:main:a", None)] == fixed_turn(0)  # had left
    assert cache.full_reads == 4
