"""The compaction budget of a turn (SPEC §10) is one object per window, system prompt count
and tool count: a turn like the last gets the same one, and each of the three changing —
another system prompt, the session's ``/model`` on another window, more tools — shows at
once, equal to the budget built from the config by hand."""

from __future__ import annotations

from bot.agent.compaction.plan import Budget, reserve_for
from bot.model.choice import CHOICE, Choice
from bot.store import Store, estimate_tokens
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


def test_a_turn_like_the_last_gets_the_same_budget(tmp_path):
    comp, _ = _setup(tmp_path)
    tools = [_tool("read")]
    first = comp.budget(SYSTEM, tools)
    assert first == by_hand(comp, SYSTEM, tools, "openai/fake-model")
    assert comp.budget(SYSTEM, tools) is first


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
    assert comp.budget(SYSTEM, None) is default


def test_more_tools_show_at_once(tmp_path):
    comp, _ = _setup(tmp_path)
    tools = [_tool("read")]
    before = comp.budget(SYSTEM, tools)
    more = [*tools, _tool("mcp_lookup")]
    after = comp.budget(SYSTEM, more)
    assert after == by_hand(comp, SYSTEM, more, "openai/fake-model")
    assert after.tools > before.tools


# --------------------------------------------------- the system message after the user's
def test_the_delivery_instructions_are_counted_once_and_equal_a_fresh_count(tmp_path):
    comp, _ = _setup(tmp_path)
    model = comp.model
    asked: list[dict] = []
    real = comp._counters[model]

    def counter(message: dict) -> int:
        asked.append(message)
        return real(message)

    comp._counters[model] = counter
    after = {"role": "system", "content": "Telegram: send files with MEDIA: lines. " * 5}
    first = comp.count_message(after)
    assert first == real(after) == estimate_tokens(after)
    assert comp.count_message(dict(after)) == first  # the next turn's: not counted again
    assert len(asked) == 1
    other = {"role": "system", "content": "Discord: keep it short."}
    assert comp.count_message(other) == estimate_tokens(other)  # another text: counted
    assert len(asked) == 2
    user = {"role": "user", "content": after["content"]}
    comp.count_message(user)
    comp.count_message(user)  # other messages are counted every time, as before
    assert len(asked) == 4
