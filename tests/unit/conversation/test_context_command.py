"""/context with the real agent's prompt engine (no model call, no daemon): what the system
prompt is made of, as a list, in detail, or as JSON, for the session the command came from."""

from __future__ import annotations

import json

import pytest

from bot.agent.turn import Agent
from bot.config import parse_config
from bot.conversation.commands import CommandPorts, command_call, run_command
from bot.conversation.commands.session import context_kind
from bot.conversation.prepare import Prepare
from bot.rules.admission import Verdict
from bot.store import Store
from channels.base import InboundMessage


@pytest.fixture
def ports(tmp_path):
    cfg = parse_config(
        {
            "agent": {"workspace": str(tmp_path / "ws"), "state_dir": str(tmp_path / "state")},
            "channels": {"telegram": {"allow_from": ["42"]}},
        }
    )
    store = Store(":memory:")
    agent = Agent(cfg, store)
    prep = Prepare(cfg, agent, {}, store)

    def turn_request(call):
        return prep.request(call.msg, call.key, "", call.verdict, include_intro=False)

    yield CommandPorts(cfg, store, agent, turn_request=turn_request)
    store.close()


async def _context(ports: CommandPorts, args: str = "") -> str:
    msg = InboundMessage(
        channel="telegram", chat_id="42", sender_id="42", text=f"/context {args}".strip()
    )
    call = command_call(
        msg, ports.cfg, "agent:main:main", Verdict("serve", "owner"), on_arrival=False
    )
    assert call is not None
    return (await run_command(call, ports)).texts[0]


@pytest.mark.parametrize(
    ("args", "kind"), [("", "list"), ("LIST", "list"), ("detail", "detail"), ("Json", "json")]
)
def test_context_kind(args, kind):
    assert context_kind(args) == kind


async def test_context_lists_the_prompt_and_its_json_parses(ports):
    (tmp := ports.cfg.agent.workspace).mkdir(parents=True, exist_ok=True)
    (tmp / "AGENTS.md").write_text("Be brief.\n")
    listed = await _context(ports)
    assert f"Workspace: {ports.cfg.agent.workspace}" in listed
    assert "- AGENTS.md: " in listed and "AGENTS.md: MISSING" not in listed  # it exists now
    data = json.loads(await _context(ports, "json"))
    assert data["system_prompt"]["chars"] > 0
    assert "AGENTS.md" in {f["name"] for f in data["files"]}
    assert len(await _context(ports, "detail")) >= len(listed)
