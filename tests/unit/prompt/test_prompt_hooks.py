"""Plugin hooks around the system prompt (SPEC §2.9)."""

from __future__ import annotations

import logging
import sys
import types

import pytest

from bot.prompt.hooks import Handler, HookResult, HookRunner, apply_system, apply_user, load_plugins

EVENT = {"prompt": "BASE", "message": "hi", "session_key": "agent:main:main", "channel": "telegram"}


def hook(value, priority=None):
    def fn(event):
        return value

    if priority is not None:
        fn.priority = priority
    return fn


def run(runner: HookRunner, event: dict = EVENT) -> HookResult:
    import asyncio

    return asyncio.run(runner.run(event))


def test_priority_orders_handlers_and_first_system_prompt_wins() -> None:
    runner = HookRunner(
        [
            Handler(
                "before_prompt_build",
                hook({"system_prompt": "LOW", "append_system_context": "low"}),
                1,
            ),
            Handler(
                "before_prompt_build",
                hook({"system_prompt": "HIGH", "append_system_context": "high"}),
                10,
            ),
            Handler("before_prompt_build", hook({"append_system_context": "mid"}), 5),
        ]
    )
    r = run(runner)
    assert r.system_prompt == "HIGH"
    assert r.append_system_context == "high\n\nmid\n\nlow"


def test_before_prompt_build_precedes_legacy_hook_regardless_of_priority() -> None:
    runner = HookRunner(
        [
            (
                "before_agent_start",
                hook({"system_prompt": "LEGACY", "prepend_context": "legacy"}, priority=100),
            ),
            (
                "before_prompt_build",
                hook({"system_prompt": "NEW", "prepend_context": "new"}, priority=-5),
            ),
        ]
    )
    r = run(runner)
    assert r.system_prompt == "NEW"
    assert r.prepend_context == "new\n\nlegacy"


def test_equal_priority_keeps_load_order() -> None:
    runner = HookRunner(
        [
            ("before_prompt_build", hook({"prepend_system_context": "one"})),
            ("before_prompt_build", hook({"prepend_system_context": "two"})),
        ]
    )
    assert run(runner).prepend_system_context == "one\n\ntwo"


def test_raising_hook_is_logged_and_ignored(caplog: pytest.LogCaptureFixture) -> None:
    def bad(event):
        raise ValueError("kaputt")

    bad.priority = 50
    runner = HookRunner(
        [("before_prompt_build", bad), ("before_prompt_build", hook({"system_prompt": "OK"}))]
    )
    with caplog.at_level(logging.ERROR):
        r = run(runner)
    assert r.system_prompt == "OK"
    assert "kaputt" in caplog.text


async def test_async_hooks_and_event_fields() -> None:
    seen = {}

    async def ahook(event):
        seen.update(event)
        return {"append_system_context": f"for {event['session_key']}"}

    runner = HookRunner([("before_prompt_build", ahook), ("before_agent_start", hook(None))])
    r = await runner.run(EVENT)
    assert r.append_system_context == "for agent:main:main"
    assert r.system_prompt is None
    assert {"prompt", "message", "session_key", "channel"} <= set(seen)


def test_object_and_hookresult_returns() -> None:
    obj = types.SimpleNamespace(system_prompt=None, append_system_context="from object")
    runner = HookRunner(
        [
            ("before_prompt_build", hook(obj)),
            ("before_prompt_build", hook(HookResult(prepend_context="pc"))),
            ("before_prompt_build", hook(42)),  # unusable: ignored
        ]
    )
    r = run(runner)
    assert r.append_system_context == "from object" and r.prepend_context == "pc"


def test_apply_system_and_user() -> None:
    assert apply_system("BASE", HookResult()) == "BASE"
    assert apply_system("BASE", HookResult(system_prompt="NEW")) == "NEW"
    assert (
        apply_system("BASE", HookResult(prepend_system_context="pre", append_system_context="post"))
        == "pre\n\nBASE\n\npost"
    )
    assert (
        apply_system("BASE", HookResult(system_prompt="X", append_system_context="post"))
        == "X\n\npost"
    )
    assert apply_user("msg", HookResult(prepend_context="ctx")) == "ctx\n\nmsg"
    assert apply_user("msg", HookResult()) == "msg"


def test_load_plugins(caplog: pytest.LogCaptureFixture) -> None:
    mod = types.ModuleType("chela_test_plugin_ok")

    def before_prompt_build(event):
        return {"append_system_context": "plugin says hi"}

    before_prompt_build.priority = 3

    def before_agent_start(event):
        return {"system_prompt": "legacy"}

    mod.before_prompt_build = before_prompt_build
    mod.before_agent_start = before_agent_start
    sys.modules[mod.__name__] = mod
    try:
        with caplog.at_level(logging.WARNING):
            runner = load_plugins(["chela_test_plugin_ok", "chela_no_such_module_xyz", ""])
        assert "chela_no_such_module_xyz" in caplog.text
        assert [(h.event, h.priority) for h in runner.handlers] == [
            ("before_prompt_build", 3.0),
            ("before_agent_start", 0.0),
        ]
        r = run(runner)
        assert r.append_system_context == "plugin says hi" and r.system_prompt == "legacy"
    finally:
        del sys.modules[mod.__name__]


def test_empty_runner() -> None:
    runner = load_plugins([])
    assert not runner
    assert run(runner) == HookResult()
