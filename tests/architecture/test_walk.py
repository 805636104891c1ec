"""The walk of one DM (ARCHITECTURE.md rule 3, "stages do not call stages"; issue 24 item 8):
through the real daemon (python-telegram-bot against the fake Bot API, the fake LLM), every
function of a pipeline stage (intake, dispatch, commands, prepare, run, reply, commit) that
starts while the measured DM is handled is called from ``bot/conversation/pipeline.py`` and
from nowhere else, and each of them is entered once.  ``bench/walk.py`` is the profiler
hook; it reports the same tables.

The one function entered twice is the commands stage's ``command_call`` (a pure parse of the
text: is it a command, by the owner?), asked at two moments that are both needed: on arrival,
before the message waits for its session's lane (an immediate command such as /stop is
answered at once, beside a turn that holds the lane), and again in the lane, where dispatch
asks it for every message it processes, including those recovered after a restart, which
never had an arrival pass.  Besides their public method, run (``preparing``: the turn's
handle, ``live_output``: the preview port), reply (``speaker``: the voice port), commit
(``write``: storing the inbound message, ``last_route``) and commands (``controls``: the
session's model and effort, SPEC §17.2/§17.3) hand the pipeline a value each, once."""

from __future__ import annotations

import sys
from collections import Counter

import pytest

from bench.walk import STAGES, Walk, stage_callers, stage_entries
from tests.e2e import make_config, running, telegram_section
from tests.fakes.llm import text

PIPELINE = "bot.conversation.pipeline"
# the functions of a stage entered more than once for one DM, and why (the module docstring)
TWICE = {("bot.conversation.commands", ".runner:command_call"): 2}  # on arrival, in the lane


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
    assert_entered_once(stage_entries(walk))


def assert_entered_once(entries: dict[str, Counter[str]]) -> None:
    assert set(entries) == set(STAGES)
    for stage, funcs in entries.items():
        assert dict(funcs) == {f: TWICE.get((stage, f), 1) for f in funcs}, stage


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


def test_the_walk_sees_a_stage_entered_twice():
    # the twin of the count: a stage's public method entered a second time is named
    walk = Walk()
    for stage in STAGES:
        walk.functions[(stage, "Stage.go", PIPELINE)] = 1
    walk.functions[("bot.conversation.commands.runner", "command_call", PIPELINE)] = 2
    entries = stage_entries(walk)
    assert entries["bot.conversation.commands"] == Counter(
        {":Stage.go": 1, ".runner:command_call": 2}
    )
    assert_entered_once(entries)  # the one defended twice
    walk.functions[("bot.conversation.reply", "Stage.go", PIPELINE)] = 2
    with pytest.raises(AssertionError, match="bot.conversation.reply"):
        assert_entered_once(stage_entries(walk))
