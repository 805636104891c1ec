"""The Agent is built with its ports (ARCHITECTURE rule 4, no late wiring): MCP tools and
the cron service come in through the constructor, nothing is assigned from outside."""

from __future__ import annotations

from bot.agent.tools import Tool, schema
from bot.agent.turn import Agent, TurnRequest
from bot.store import Store
from tests.e2e import make_config
from tests.fakes.mcp_port import FakeMcp, Nowhere, echo


def _tool(name: str) -> Tool:
    return Tool(name, "an MCP tool", schema({}), echo)


def _agent(tmp_path, **ports) -> Agent:
    cfg = make_config(tmp_path, Nowhere(), tools={"enabled": ["read", "cron"]})
    return Agent(cfg, Store(":memory:"), **ports)


def test_mcp_port_tools_offered_and_refreshed(tmp_path):
    mcp = FakeMcp()
    mcp.offered = [_tool("mcp_one")]
    agent = _agent(tmp_path, mcp=mcp)
    assert "mcp_one" in agent.tool_names("owner")
    mcp.offered.append(_tool("mcp_two"))
    agent.refresh_tools()  # what the manager's on_change calls
    assert {"mcp_one", "mcp_two"} <= agent.tool_names("owner")


def test_no_mcp_port_no_mcp_tools(tmp_path):
    agent = _agent(tmp_path)
    assert agent.mcp is None
    assert "mcp_one" not in agent.tool_names("owner")


def test_cron_port_read_when_a_turn_needs_it(tmp_path):
    box: dict = {}
    agent = _agent(tmp_path, cron=lambda: box.get("cron"))
    owner = TurnRequest(session_key="agent:main:main", user_text="hi")
    assert agent.tool_context(owner).cron is None
    box["cron"] = service = object()  # built after the agent (cron → scheduled → agent)
    assert agent.tool_context(owner).cron is service
    guest = TurnRequest(
        session_key="agent:main:g", user_text="hi", trust="guest", file_root=tmp_path / "g"
    )
    assert agent.tool_context(guest).cron is None


def test_cron_api_object_still_accepted(tmp_path):
    service = object()
    agent = _agent(tmp_path, cron_api=service)
    owner = TurnRequest(session_key="agent:main:main", user_text="hi")
    assert agent.tool_context(owner).cron is service
