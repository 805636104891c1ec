"""The tools a turn carries: the registry's schemas (a tool registered later is in them, an
MCP refresh reaches them) and the tool context the config describes (exec policy, media
dir, file root) for owner and guest."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from bot.agent.request import TurnRequest
from bot.agent.tools import ExecPolicy, Tool, ToolRegistry, schema
from bot.agent.turn import Agent
from bot.store import Store
from tests.e2e import make_config
from tests.fakes.mcp_port import FakeMcp, Nowhere, echo


def _tool(name: str) -> Tool:
    return Tool(name, f"the {name} tool", schema({"q": {"type": "string"}}, ["q"]), echo)


def test_a_tool_registered_later_is_in_the_schema_list():
    reg = ToolRegistry([_tool("a")])
    assert [t["function"]["name"] for t in reg.openai_tools()] == ["a"]
    reg.register(_tool("b"))
    assert [t["function"]["name"] for t in reg.openai_tools()] == ["a", "b"]


def _agent(tmp_path: Path, mcp=None, **sections) -> Agent:
    cfg = make_config(tmp_path, Nowhere(), **sections)
    return Agent(cfg, Store(":memory:"), mcp=mcp)


def test_an_mcp_refresh_reaches_the_schemas_a_turn_sends(tmp_path):
    mcp = FakeMcp()
    agent = _agent(tmp_path, mcp, tools={"enabled": ["read"]})
    assert [t["function"]["name"] for t in agent._openai_tools("owner") or []] == ["read"]
    mcp.offered.append(_tool("mcp_lookup"))
    agent.refresh_tools()
    names = [t["function"]["name"] for t in agent.registry.openai_tools()]
    assert names == ["read", "mcp_lookup"]
    assert agent._openai_tools("owner") == agent.registry.openai_tools()


def _request(trust: str, tmp_path: Path) -> TurnRequest:
    return TurnRequest(
        session_key="s",
        user_text="hi",
        trust=trust,  # type: ignore[arg-type]
        file_root=tmp_path / "guest" if trust == "guest" else None,
        route={"channel": "telegram", "chat_id": "1"},
    )


def test_the_tool_context_is_what_the_config_says(tmp_path):
    exec_cfg = {"security": "allowlist", "allow": ["ls", "cat"], "timeout_seconds": 7}
    agent = _agent(tmp_path, tools={"exec": exec_cfg})
    cfg = agent.cfg
    owner = agent.tool_context(_request("owner", tmp_path))
    guest = agent.tool_context(_request("guest", tmp_path))
    ex = cfg.tools.exec
    expected = ExecPolicy(
        security=ex.security,
        allow=("ls", "cat"),
        timeout_seconds=7,
        sandbox=ex.sandbox == "on",
        network=ex.network,
        hidden=tuple(str(p) for p in (cfg.agent.state_dir, cfg.source) if p),
    )
    assert owner.exec_policy == expected and guest.exec_policy == expected
    assert owner.media_dir == cfg.agent.state_dir / "media" and guest.media_dir is None
    assert owner.file_root == cfg.agent.workspace and guest.file_root != cfg.agent.workspace
    assert (owner.timezone, owner.model, owner.agent_id) == ("UTC", cfg.agent.model, "main")
    with_other_key = dataclasses.replace(_request("owner", tmp_path), session_key="t")
    assert agent.tool_context(with_other_key).session_key == "t"


def test_two_agents_keep_their_own_exec_policy(tmp_path):
    a = _agent(tmp_path / "a", tools={"exec": {"security": "deny"}})
    b = _agent(tmp_path / "b", tools={"exec": {"security": "full", "sandbox": "off"}})
    pa = a.tool_context(_request("owner", tmp_path)).exec_policy
    pb = b.tool_context(_request("owner", tmp_path)).exec_policy
    assert (pa.security, pb.security, pb.sandbox) == ("deny", "full", False)
