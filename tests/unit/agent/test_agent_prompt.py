"""The agent's system prompt: built once per channel runtime context (two turns of one chat
share it; another chat kind, trust level or tool list gets its own), and whatever the
context is made of reaches it: the session's ``/model`` and ``/think``, the host's time
zone, an MCP server's new tool, the workspace files."""

from __future__ import annotations

from pathlib import Path

import tzlocal

from bot.agent.context import prompt_context
from bot.agent.request import TurnRequest
from bot.agent.tools import Tool, schema
from bot.agent.turn import Agent
from bot.model.choice import CHOICE, Choice
from bot.prompt.context import RuntimeInfo, ToolSpec
from bot.store import Store
from tests.e2e import make_config
from tests.fakes.mcp_port import FakeMcp, Nowhere, echo


TOOLS = (ToolSpec("read", "read a file"), ToolSpec("exec", "run a command"))
RUNTIME = RuntimeInfo(host="h", os="Linux")


def _cfg(tmp_path: Path, **agent):
    cfg = make_config(tmp_path, Nowhere(), agent=agent, owner={"numbers": ["+100"]})
    cfg.agent.workspace.mkdir(parents=True, exist_ok=True)
    return cfg


def _req(**kw) -> TurnRequest:
    base = dict(session_key="s1", user_text="hi", channel="telegram", chat_type="direct")
    return TurnRequest(**{**base, **kw})


def _ctx(cfg, req=None):
    return prompt_context(cfg, req or _req(), TOOLS, "", RUNTIME)


def test_one_chat_s_turns_share_one_built_prompt_and_another_context_gets_its_own(tmp_path):
    agent = Agent(_cfg(tmp_path), Store(":memory:"))
    first = agent.system_prompt(_req())
    again = agent.system_prompt(_req(session_key="s9", user_text="another message"))
    assert again is first and agent.cache.builds == 1  # built once for this context
    group = agent.system_prompt(_req(chat_type="group", group_id="g", group_title="T"))
    guest = agent.system_prompt(_req(trust="guest", file_root=tmp_path / "g"))
    assert agent.cache.builds == 3 and len({first, group, guest}) == 3


def test_the_sessions_model_and_thinking_choice_reach_the_context(tmp_path):
    cfg = _cfg(tmp_path, thinking="low", models={"fast": "openai/fast-model"})
    default = _ctx(cfg)
    assert (default.model, default.thinking) == ("openai/fake-model", "low")
    token = CHOICE.set(Choice(object(), "openai/fast-model", "high"))  # /model fast, /think high
    try:
        chosen = _ctx(cfg)
    finally:
        CHOICE.reset(token)
    assert (chosen.model, chosen.thinking) == ("openai/fast-model", "high")
    token = CHOICE.set(Choice(object(), "", ""))  # /think off on the default model
    try:
        off = _ctx(cfg)
    finally:
        CHOICE.reset(token)
    assert (off.model, off.thinking) == ("openai/fake-model", "off")
    assert _ctx(cfg) == default


def test_the_hosts_time_zone_reaches_the_context(tmp_path, monkeypatch):
    cfg = _cfg(tmp_path, timezone="")  # no configured zone: the host's
    monkeypatch.setattr(tzlocal, "get_localzone_name", lambda: "Europe/Paris")
    assert _ctx(cfg).timezone == "Europe/Paris"
    monkeypatch.setattr(tzlocal, "get_localzone_name", lambda: "Asia/Tokyo")
    assert _ctx(cfg).timezone == "Asia/Tokyo"


# ------------------------------------------------------------------- through the agent
def test_an_mcp_tool_offered_later_reaches_the_system_prompt(tmp_path):
    mcp = FakeMcp()
    agent = Agent(_cfg(tmp_path), Store(":memory:"), mcp=mcp)
    before = agent.system_prompt(_req())
    assert agent.system_prompt(_req()) is before  # cached
    mcp.offered.append(Tool("mcp_lookup", "looks things up", schema({}), echo))
    agent.refresh_tools()  # what the MCP manager's on_change calls
    after = agent.system_prompt(_req())
    assert "mcp_lookup" in after and "mcp_lookup" not in before


def test_guest_and_owner_turns_get_their_own_prompts(tmp_path):
    agent = Agent(_cfg(tmp_path), Store(":memory:"))
    owner = agent.prompt_context(_req())
    guest = agent.prompt_context(_req(trust="guest", file_root=tmp_path / "g"))
    assert owner.trust == "owner" and guest.trust == "guest"
    assert guest.tools == agent._tool_specs["guest"] and guest.file_root == tmp_path / "g"
    assert agent.prompt_context(_req()) == owner


def test_a_workspace_edit_reaches_the_system_prompt(tmp_path):
    agent = Agent(_cfg(tmp_path), Store(":memory:"))
    soul = agent.cfg.agent.workspace / "SOUL.md"
    soul.write_text("Speak like a pirate.\n")
    assert "Speak like a pirate." in agent.system_prompt(_req())
    soul.write_text("Speak like a poet, always in rhyme.\n")
    text = agent.system_prompt(_req())
    assert "Speak like a poet" in text and "pirate" not in text
