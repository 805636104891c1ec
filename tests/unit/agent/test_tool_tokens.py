"""The tool schemas' tokens in the compaction budget (SPEC §10) follow the tool list: an
MCP server that offers more tools (the agent rebuilds its lists) or a list grown in place
counts more."""

from __future__ import annotations

from bot.agent.tools import Tool, schema
from bot.agent.turn import Agent
from bot.prompt.context import ToolSpec
from bot.store import Store
from tests.e2e import make_config
from tests.fakes.mcp_port import FakeMcp, Nowhere, echo

SYSTEM = "You are a test assistant."


def _tool(name: str) -> Tool:
    desc = {"type": "string", "description": "what to look up " * 20}
    return Tool(name, "an MCP tool that looks things up", schema({"q": desc}), echo)


def _agent(tmp_path, mcp: FakeMcp) -> Agent:
    cfg = make_config(tmp_path, Nowhere(), tools={"enabled": ["read"]})
    return Agent(cfg, Store(":memory:"), mcp=mcp)


def _tool_tokens(agent: Agent, tools: list[dict] | None) -> int:
    return agent.compactor.budget(SYSTEM, tools).tools


def test_an_mcp_refresh_is_counted_again(tmp_path):
    mcp = FakeMcp()
    mcp.offered = [_tool("mcp_one")]
    agent = _agent(tmp_path, mcp)
    before = _tool_tokens(agent, agent._openai_tools("owner"))
    assert before == _tool_tokens(agent, agent._openai_tools("owner"))
    mcp.offered.append(_tool("mcp_two"))
    agent.refresh_tools()  # what the MCP manager's on_change calls
    after = _tool_tokens(agent, agent._openai_tools("owner"))
    assert after > before + 50


def test_a_list_grown_in_place_is_counted_again(tmp_path):
    agent = _agent(tmp_path, FakeMcp())
    tools = list(agent._openai_tools("owner") or [])
    before = _tool_tokens(agent, tools)
    t = _tool("mcp_three")
    tools.append(ToolSpec(t.name, t.summary, t.parameters).openai_schema())
    assert _tool_tokens(agent, tools) > before
