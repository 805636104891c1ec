"""Compaction plans against the model the session's next turn uses (SPEC §10, §17.2), end
to end: fake Telegram → daemon → fake LLMs → fake Telegram.

The main model has a big window.  ``/model small`` switches the session to an
``[agent.models]`` alias on a server of its own that refuses, like a real provider, any
request over its small window (HTTP 400 ``context_length_exceeded``).  The history built on
the main model must be compacted BEFORE the first request to the small model, and that
request must fit.  Its twin: the same history on the main model is not compacted.  And
the other way round: a session switched to a model with a bigger window than the main
model's is not compacted early."""

from __future__ import annotations

from bot.agent.compaction import SUMMARY_INSTRUCTIONS, SUMMARY_LABEL
from tests.e2e import make_config, running, telegram_section
from tests.fakes.llm import FakeLLM

OWNER = 42
KEY = "agent:main:main"
SMALL = 6000  # the small model's window (tokens, as the fake counts them)
BIG = 200_000
TURNS = 12
FILLER = "the quick brown fox jumps over the lazy dog while the cat sleeps on the mat. " * 12


def is_summary(req: dict) -> bool:
    return req["messages"][0]["content"] == SUMMARY_INSTRUCTIONS


def is_flush(req: dict) -> bool:
    return "[Memory flush before compaction]" in str(req["messages"][-1].get("content"))


def has_summary(req: dict) -> bool:
    return any(SUMMARY_LABEL in str(m.get("content") or "") for m in req["messages"][1:])


def cfg_for(tmp_path, llm, tg, *, main_window: int, models: dict):
    agent = {"compaction": {"context_window": main_window}, "models": models}
    return make_config(tmp_path, llm, channels=telegram_section(tg), agent=agent)


async def say(tg, words: str) -> str:
    before = len(tg.sent)
    tg.inject_message(OWNER, words, from_id=OWNER)
    return (await tg.wait_for_sent(before + 1, timeout=30))[before].visible_text


async def long_history(tg, turns: int = TURNS) -> None:
    for i in range(turns):
        assert await say(tg, f"turn {i}: {FILLER}") == "ok"


async def test_a_session_on_a_small_model_is_compacted_before_its_request(tmp_path, llm, tg):
    llm.context_window = 10**9  # counts every request (never refuses one)
    async with FakeLLM(model="small-model", context_window=SMALL) as small:
        alias = {"model": "openai/small-model", "api_base": small.base_url}
        cfg = cfg_for(
            tmp_path, llm, tg, main_window=BIG, models={"small": alias | {"context_window": SMALL}}
        )
        async with running(cfg) as d:
            await long_history(tg)
            assert not any(is_summary(r) for r in llm.requests)  # the big window holds it
            assert max(llm.request_tokens) > SMALL  # too long for the small model as it is
            assert await say(tg, "/model small") == "Now using openai/small-model."
            assert await say(tg, "and now a short question") == "ok"
            assert d.store.summary(KEY) is not None
        turns = [r for r in small.requests if not is_flush(r)]
        assert small.rejected == []  # never sent a request the small model refuses
        assert max(small.request_tokens) <= SMALL
        assert has_summary(turns[-1])  # compacted before the request
        assert "and now a short question" in str(turns[-1]["messages"])


async def test_the_same_history_on_the_big_main_model_is_not_compacted(tmp_path, llm, tg):
    llm.context_window = 10**9
    alias = {"model": "openai/small-model", "api_base": llm.base_url, "context_window": SMALL}
    cfg = cfg_for(tmp_path, llm, tg, main_window=BIG, models={"small": alias})
    async with running(cfg) as d:
        await long_history(tg)
        assert await say(tg, "and now a short question") == "ok"
        assert d.store.summary(KEY) is None
    assert not any(is_summary(r) or has_summary(r) for r in llm.requests)
    assert max(llm.request_tokens) > SMALL  # the history alone would not fit the alias


async def test_a_session_on_a_bigger_model_is_not_compacted_early(tmp_path, llm, tg):
    big = {"model": "openai/big-model", "api_base": llm.base_url, "context_window": BIG}
    cfg = cfg_for(tmp_path, llm, tg, main_window=SMALL, models={"big": big})
    async with running(cfg) as d:
        assert await say(tg, "/model big") == "Now using openai/big-model."
        await long_history(tg)
        assert await say(tg, "and now a short question") == "ok"
        assert d.store.summary(KEY) is None
    assert not any(is_summary(r) or has_summary(r) for r in llm.requests)
    assert {r["model"] for r in llm.requests} == {"big-model"}


def window_in(status: str) -> int:
    line = next(x for x in status.splitlines() if x.startswith("Context:"))
    return int(line.split("(window ")[1].split(",")[0])


async def test_status_context_and_compact_follow_the_session_model(tmp_path, llm, tg):
    """/status and /context report the window of the model the session is on, and /compact's
    memory flush (a turn of the session) goes to that model; before /model they report the
    main model's window.  The summary itself is written by the summary model
    (agent.compaction.model, else agent.model), whatever the session is on."""
    llm.context_window = 10**9
    async with FakeLLM(model="small-model", context_window=SMALL) as small:
        alias = {"model": "openai/small-model", "api_base": small.base_url}
        cfg = cfg_for(
            tmp_path, llm, tg, main_window=BIG, models={"small": alias | {"context_window": SMALL}}
        )
        async with running(cfg) as d:
            await long_history(tg, 3)
            assert window_in(await say(tg, "/status")) == BIG  # the twin: the main model
            assert await say(tg, "/model small") == "Now using openai/small-model."
            assert window_in(await say(tg, "/status")) == SMALL
            assert f"(window {SMALL}:" in await say(tg, "/context")
            flushes_before = len([r for r in llm.requests if is_flush(r)])
            await say(tg, "/compact")
            assert d.store.summary(KEY) is not None
        assert any(is_flush(r) for r in small.requests)  # the session's model
        assert len([r for r in llm.requests if is_flush(r)]) == flushes_before
        assert any(is_summary(r) for r in llm.requests)  # the summary model: agent.model
