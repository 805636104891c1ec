"""``browser`` in ``tools.enabled``: the browser joins owner turns through ``[tools.browser]``
(the registry's ``always`` tools), so naming it is quiet, in the registry and in the config
check alike; a typo beside it still warns."""

from __future__ import annotations

import logging

from bot.agent.tools import Tool, build_registry, schema
from bot.agent.turn import Agent
from bot.cli.validate import tool_warnings
from bot.config import parse_config
from bot.store import Store
from tests.fakes.mcp_port import echo


def _browser() -> Tool:
    return Tool("browser", "the browser", schema({"action": {"type": "string"}}), echo)


def _unknown(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if "unknown tool" in r.getMessage()]


def test_an_always_tool_named_in_enabled_is_quiet_and_a_typo_warns(caplog):
    with caplog.at_level(logging.WARNING):
        reg = build_registry(["read", "browser"], always=[_browser()])
    assert reg.names() == ["read", "browser"] and _unknown(caplog) == []
    with caplog.at_level(logging.WARNING):
        build_registry(["read", "browser", "browsr"], always=[_browser()])
    [line] = _unknown(caplog)
    assert "'browsr'" in line and "browser" in line.split("known:", 1)[1]


def test_the_agent_offers_the_browser_named_in_enabled_without_a_warning(tmp_path, caplog):
    agent_dirs = {"workspace": str(tmp_path / "ws"), "state_dir": str(tmp_path / "st")}
    tools = {"enabled": ["read", "browser"], "browser": {"enabled": True}}
    cfg = parse_config({"agent": agent_dirs, "tools": tools})
    with caplog.at_level(logging.WARNING):
        agent = Agent(cfg, Store(":memory:"))
    assert "browser" in agent.tool_names("owner") and _unknown(caplog) == []


def test_the_config_check_knows_the_browser_and_still_names_a_typo():
    on = parse_config({"tools": {"enabled": ["read", "browser"], "browser": {"enabled": True}}})
    assert tool_warnings(on) == []
    typo = parse_config({"tools": {"enabled": ["read", "brwoser"], "browser": {"enabled": True}}})
    [w] = tool_warnings(typo)
    assert "unknown tool 'brwoser'" in w


def test_the_browser_named_while_its_section_is_off_says_how_to_turn_it_on():
    off = parse_config({"tools": {"enabled": ["read", "browser"]}})
    [w] = tool_warnings(off)
    assert "tools.browser.enabled is false" in w and "unknown tool" not in w
