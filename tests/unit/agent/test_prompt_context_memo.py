"""The agent keeps one ``PromptContext`` per channel runtime context (``PromptContexts``), so a
turn's prompt look-up finds the cached prompt by identity.  A hit must be the context a fresh
build gives; whatever the context is made of must reach it: each request field it reads,
the session's ``/model`` and ``/think``, the host's time zone, the trust level's tools (an
MCP server's new tool), and the workspace files (through the prompt cache behind it)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import tzlocal

from bot.agent.context import PromptContexts, prompt_context
from bot.agent.request import TurnRequest
from bot.agent.tools import Tool, schema
from bot.agent.turn import Agent
from bot.model.choice import CHOICE, Choice
from bot.prompt.cache import PromptCache
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


# a value other than the default for every field of TurnRequest: a field added to the
# request must be added here, and so be checked against the memo's key
OTHER = {
    "session_key": "s2",
    "user_text": "another text",
    "kind": "heartbeat",
    "session_kind": "cron",
    "channel": "discord",
    "account": "work",
    "chat_type": "group",
    "group_id": "g-7",
    "group_title": "The Group",
    "extra_context": "## Group Chat Context\nbe brief",
    "capabilities": ("reactions", "inline_buttons"),
    "reactions": "extensive",
    "after_user_system": "reply briefly",
    "route": {"channel": "discord", "chat_id": "9"},
    "message_text": "raw text",
    "trust": "guest",
    "file_root": Path("/tmp/guest-a"),
    "media": [{"kind": "image", "path": "x.png"}],
    "client_instructions": "be terse",
    "prior": [{"role": "user", "content": "earlier"}],
    "user_turn": False,
    "client_tools": [{"type": "function", "function": {"name": "f"}}],
    "params": {"max_tokens": 5},
}


def test_every_request_field_is_checked():
    assert set(OTHER) == {f.name for f in dataclasses.fields(TurnRequest)}


@pytest.mark.parametrize("name", sorted(OTHER))
def test_a_request_differing_in_one_field_gets_the_context_a_fresh_build_gives(tmp_path, name):
    cfg = _cfg(tmp_path)
    memo = PromptContexts(cfg, "secret", RUNTIME)
    first = _req(trust="guest", file_root=Path("/tmp/guest-b")) if name == "file_root" else _req()
    memo.get(first, TOOLS)
    second = dataclasses.replace(first, **{name: OTHER[name]})
    got = memo.get(second, TOOLS)
    assert got == prompt_context(cfg, second, TOOLS, "secret", RUNTIME)
    assert memo.get(second, TOOLS) is got  # and a hit is that very object


def test_a_hit_is_the_same_object_and_equal_to_a_fresh_build(tmp_path):
    cfg = _cfg(tmp_path)
    memo = PromptContexts(cfg, "secret", RUNTIME)
    group = _req(chat_type="group", group_id="g", group_title="T", capabilities=["reactions"])
    for req in (_req(), group, _req(trust="guest", file_root=Path("/tmp/g")), _req(kind="cron")):
        ctx = memo.get(req, TOOLS)
        again = memo.get(dataclasses.replace(req, session_key="other", user_text="x"), TOOLS)
        assert again is ctx
        assert ctx == prompt_context(cfg, req, TOOLS, "secret", RUNTIME)
        cache = PromptCache(watch=False)  # the prompt text is the fresh context's, byte for byte
        assert (
            cache.get(ctx).text
            == cache.get(prompt_context(cfg, req, TOOLS, "secret", RUNTIME)).text
        )


def test_the_sessions_model_and_thinking_choice_reach_the_context(tmp_path):
    cfg = _cfg(tmp_path, thinking="low", models={"fast": "openai/fast-model"})
    memo = PromptContexts(cfg, "", RUNTIME)
    default = memo.get(_req(), TOOLS)
    assert (default.model, default.thinking) == ("openai/fake-model", "low")
    token = CHOICE.set(Choice(object(), "openai/fast-model", "high"))  # /model fast, /think high
    try:
        chosen = memo.get(_req(), TOOLS)
    finally:
        CHOICE.reset(token)
    assert (chosen.model, chosen.thinking) == ("openai/fast-model", "high")
    token = CHOICE.set(Choice(object(), "", ""))  # /think off on the default model
    try:
        off = memo.get(_req(), TOOLS)
    finally:
        CHOICE.reset(token)
    assert (off.model, off.thinking) == ("openai/fake-model", "off")
    assert memo.get(_req(), TOOLS) is default


def test_the_hosts_time_zone_reaches_the_context(tmp_path, monkeypatch):
    cfg = _cfg(tmp_path, timezone="")  # no configured zone: the host's
    memo = PromptContexts(cfg, "", RUNTIME)
    monkeypatch.setattr(tzlocal, "get_localzone_name", lambda: "Europe/Paris")
    assert memo.get(_req(), TOOLS).timezone == "Europe/Paris"
    monkeypatch.setattr(tzlocal, "get_localzone_name", lambda: "Asia/Tokyo")
    assert memo.get(_req(), TOOLS).timezone == "Asia/Tokyo"


def test_other_tools_get_their_own_context(tmp_path):
    cfg = _cfg(tmp_path)
    memo = PromptContexts(cfg, "", RUNTIME)
    before = memo.get(_req(), TOOLS)
    more = (*TOOLS, ToolSpec("mcp_lookup", "look things up"))
    assert memo.get(_req(), more).tools is more
    assert memo.get(_req(), TOOLS) is before


def test_the_memo_stays_bounded(tmp_path):
    memo = PromptContexts(_cfg(tmp_path), "", RUNTIME, max_entries=4)
    for i in range(10):
        memo.get(_req(group_id=f"g{i}", chat_type="group"), TOOLS)
    assert len(memo) == 4


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
    assert agent.prompt_context(_req()) is owner


def test_a_workspace_edit_reaches_the_system_prompt(tmp_path):
    agent = Agent(_cfg(tmp_path), Store(":memory:"))
    soul = agent.cfg.agent.workspace / "SOUL.md"
    soul.write_text("Speak like a pirate.\n")
    assert "Speak like a pirate." in agent.system_prompt(_req())
    soul.write_text("Speak like a poet, always in rhyme.\n")
    text = agent.system_prompt(_req())
    assert "Speak like a poet" in text and "pirate" not in text
