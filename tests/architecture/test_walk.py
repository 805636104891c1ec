"""The walk of one DM (ARCHITECTURE.md rule 3, "stages do not call stages"; issue 24 item 8):
through the real daemon (python-telegram-bot against the fake Bot API, the fake LLM), every
function of a pipeline stage (intake, dispatch, commands, prepare, run, reply, commit) that
starts while the measured DM is handled is called from ``bot/conversation/pipeline.py`` and
from nowhere else.  ``bench/walk.py`` is the profiler hook; it reports the same table."""

from __future__ import annotations

import sys
from collections import Counter

from bench.walk import STAGES, Walk, stage_callers
from tests.e2e import make_config, running, telegram_section
from tests.fakes.llm import text

PIPELINE = "bot.conversation.pipeline"


async def _dm(tg, n: int) -> None:
    tg.inject_message(42, f"hello {n}", from_id=42)
    await tg.wait_for_sent(n, timeout=30)


async def test_one_dm_enters_each_stage_only_from_the_pipeline(tmp_path, llm, tg):
    llm.script(text("reply 1"), text("reply 2"))
    async with running(make_config(tmp_path, llm, channels=telegram_section(tg))):
        await _dm(tg, 1)  # warm-up: imports, the prompt cache
        walk = Walk()
        before = sys.getprofile()
        sys.setprofile(walk)
        try:
            await _dm(tg, 2)
        finally:
            sys.setprofile(before)
    callers = stage_callers(walk)
    assert {stage: set(c) for stage, c in callers.items()} == {s: {PIPELINE} for s in STAGES}


def test_the_walk_sees_a_stage_called_from_elsewhere():
    # the twin: a stage entered from another module (the run stage from the agent) is named
    walk = Walk()
    walk.calls[("bot.conversation.run", "bot.agent.turn")] = 1
    walk.calls[("bot.conversation.reply", PIPELINE)] = 2
    walk.calls[("bot.conversation.commands.session", "bot.conversation.commands.runner")] = 1
    assert stage_callers(walk) == {
        "bot.conversation.run": Counter({"bot.agent.turn": 1}),
        "bot.conversation.reply": Counter({PIPELINE: 2}),
    }
