"""The compaction budget of a turn (SPEC §10) is the one built from the config by hand, and
each of its inputs changing — another system prompt, the session's ``/model`` on another
window, more tools — shows at once."""

from __future__ import annotations

from bot.agent.compaction.plan import Budget, reserve_for
from bot.model.choice import CHOICE, Choice
from bot.store import Store
from tests.unit.agent.test_compaction_plan import SYSTEM, compactor, config


def by_hand(comp, system: str, tools: list[dict] | None, model: str) -> Budget:
    w = comp.window(model)
    c = comp.cfg.agent.compaction
    return Budget(
        window=w,
        system=comp.count_text(system, model) + 8,
        tools=comp.count_text(_tools_json(tools), model) + 8 if tools else 0,
        reserve=reserve_for(w),
        threshold=c.threshold,
        keep_recent=c.keep_recent_tokens,
        summary_max=c.summary_max_tokens,
        history_limit=comp.cfg.agent.history_limit,
    )


def _tools_json(tools: list[dict]) -> str:
    import json

    return json.dumps(tools, ensure_ascii=False, sort_keys=True)


def _tool(name: str) -> dict:
    return {"type": "function", "function": {"name": name, "description": "d " * 50}}


def _setup(tmp_path):
    small = {"model": "openai/small-model", "context_window": 4000}
    cfg = config(tmp_path, compaction={"context_window": 100_000}, models={"small": small})
    main = object()
    return compactor(cfg, Store(":memory:"), main_llm=main), main


def test_the_budget_is_the_one_built_by_hand(tmp_path):
    comp, _ = _setup(tmp_path)
    tools = [_tool("read")]
    first = comp.budget(SYSTEM, tools)
    assert first == by_hand(comp, SYSTEM, tools, "openai/fake-model")
    assert comp.budget(SYSTEM, tools) == first


def test_another_system_prompt_shows_at_once(tmp_path):
    comp, _ = _setup(tmp_path)
    before = comp.budget(SYSTEM, None)
    longer = SYSTEM + "## Extra\n" + "more rules " * 300
    after = comp.budget(longer, None)
    assert after == by_hand(comp, longer, None, "openai/fake-model")
    assert after.system > before.system


def test_the_sessions_model_window_shows_at_once(tmp_path):
    comp, main = _setup(tmp_path)
    default = comp.budget(SYSTEM, None)
    token = CHOICE.set(Choice(main, "openai/small-model"))  # /model small
    try:
        small = comp.budget(SYSTEM, None)
    finally:
        CHOICE.reset(token)
    assert (default.window, small.window) == (100_000, 4000)
    assert small == by_hand(comp, SYSTEM, None, "openai/small-model")
    assert comp.budget(SYSTEM, None) == default


def test_more_tools_show_at_once(tmp_path):
    comp, _ = _setup(tmp_path)
    tools = [_tool("read")]
    before = comp.budget(SYSTEM, tools)
    more = [*tools, _tool("mcp_lookup")]
    after = comp.budget(SYSTEM, more)
    assert after == by_hand(comp, SYSTEM, more, "openai/fake-model")
    assert after.tools > before.tools
