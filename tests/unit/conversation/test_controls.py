"""/stop, /model and /think (bot.conversation.commands.controls) in memory: the table's
handlers with an in-memory store and a stand-in for the running turns; the e2e proofs are
tests/e2e/test_controls_e2e.py.  And the model client's side (bot.model.choice): the chain a
session's choice makes."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from bot.rules.admission import Verdict
from bot.config import parse_config
from bot.conversation.commands import CommandPorts, command_call, run_command
from bot.conversation.commands import controls
from bot.model import LLMClient, ModelTarget
from bot.model.choice import CHOICE, Choice, chain
from bot.store import Store
from channels.base import InboundMessage

OWNER, GUEST, GROUP = "42", "555", "-100"
CFG = parse_config(
    {
        "agent": {
            "model": "openai/main-model",
            "fallbacks": ["openai/backup-model"],
            "models": {"fast": "openai/fast-model"},
            "thinking": "low",
        },
        "channels": {"telegram": {"allow_from": [OWNER], "groups": [GROUP]}},
    }
)


@dataclass
class Turns:
    """A stand-in for ``Run``: which sender's turn runs in which session."""

    running: dict[str, str] = field(default_factory=dict)
    stopped: list[str] = field(default_factory=list)

    def started_by(self, key: str) -> str | None:
        return self.running.get(key)

    async def stop(self, key: str) -> bool:
        self.stopped.append(key)
        return self.running.pop(key, None) is not None


@pytest.fixture
def store():
    s = Store(":memory:")
    yield s
    s.close()


def ports(store: Store, turns: Turns | None = None) -> CommandPorts:
    return CommandPorts(CFG, store, agent=None, turn_request=lambda c: c.key, turns=turns)  # type: ignore[arg-type]


async def say(text: str, p: CommandPorts, sender: str = OWNER, group: bool = False) -> str:
    chat = GROUP if group else sender
    msg = InboundMessage(
        channel="telegram",
        chat_id=chat,
        sender_id=sender,
        text=text,
        chat_type="group" if group else "direct",
    )
    trust = "owner" if sender == OWNER and not group else "guest"
    call = command_call(msg, CFG, f"s:{chat}", Verdict("serve", trust), on_arrival=True)
    assert call is not None
    return (await run_command(call, p)).texts[0]


# ---------------------------------------------------------------------------- /model
@pytest.mark.parametrize(
    ("name", "model"),
    [
        ("fast", "openai/fast-model"),
        ("FAST", "openai/fast-model"),
        ("openai/backup-model", "openai/backup-model"),
        ("backup-model", "openai/backup-model"),
        ("1", "openai/main-model"),
        ("3", "openai/fast-model"),
        ("4", None),
        ("0", None),
        ("gpt-9000", None),
        ("openai/gpt-9000", None),  # an arbitrary model string is not accepted
    ],
)
def test_resolve(name, model):
    assert controls.resolve(CFG, name) == model


async def test_model_switches_and_returns(store):
    p = ports(store)
    assert await say("/model fast", p) == "Now using openai/fast-model."
    assert controls.session_model(CFG, store, f"s:{OWNER}") == "openai/fast-model"
    assert controls.session_model(CFG, store, "s:other") == "openai/main-model"  # per session
    store.reset_session(f"s:{OWNER}")  # /new keeps it
    assert controls.session_model(CFG, store, f"s:{OWNER}") == "openai/fast-model"
    assert (await say("/model", p)).splitlines()[3] == "3. fast → openai/fast-model  ← current"
    assert await say("/model default", p) == "Back to the default model: openai/main-model."
    assert controls.session_model(CFG, store, f"s:{OWNER}") == "openai/main-model"


async def test_a_choice_no_longer_configured_falls_back_to_agent_model(store):
    store.put(f"controls:s:{OWNER}", {"model": "openai/removed-model"})
    assert controls.session_model(CFG, store, f"s:{OWNER}") == "openai/main-model"


async def test_model_and_think_refused_to_a_guest_change_nothing(store):
    p = ports(store)
    assert await say("/model fast", p, GUEST) == "Only the owner can use /model."
    assert await say("/think high", p, GUEST) == "Only the owner can use /think."
    assert store.get(f"controls:s:{GUEST}") is None


# ---------------------------------------------------------------------------- /think
async def test_think_levels_and_the_default(store):
    p = ports(store)
    key = f"s:{OWNER}"
    assert controls.session_effort(CFG, store, key) == "low"  # agent.thinking
    assert await say("/think", p) == "Thinking: low. Levels: off, minimal, low, medium, high."
    assert await say("/think HIGH", p) == "Thinking set to high."
    assert controls.session_effort(CFG, store, key) == "high"
    assert await say("/think off", p) == "Thinking is off."
    assert controls.session_effort(CFG, store, key) == ""
    assert (await say("/think max", p)).startswith("There is no thinking level 'max'.")
    assert controls.session_thinking(CFG, store, key) == "off"


# ----------------------------------------------------------------------------- /stop
async def test_stop_answers(store):
    turns = Turns({f"s:{OWNER}": OWNER})
    p = ports(store, turns)
    assert await say("/stop", p) == "Stopped."
    assert await say("/stop", p) == "Nothing is running right now."
    assert await say("/stop", ports(store, None)) == "Nothing is running right now."


async def test_a_guest_stops_only_its_own(store):
    turns = Turns({f"s:{OWNER}": OWNER, f"s:{GROUP}": OWNER})
    p = ports(store, turns)
    assert await say("/stop", p, GUEST) == "Nothing is running right now."  # its own DM
    assert (await say("/stop", p, GUEST, group=True)).startswith("Only the owner or whoever")
    assert turns.stopped == [] and len(turns.running) == 2
    turns.running[f"s:{GROUP}"] = GUEST  # the twin: a turn the guest's message started
    assert await say("/stop", p, GUEST, group=True) == "Stopped."
    turns.running[f"s:{GROUP}"] = GUEST  # and the owner stops anyone's
    assert await say("/stop", p, OWNER, group=True) == "Stopped."


# ------------------------------------------------------------------ the client's chain
def client() -> LLMClient:
    return LLMClient(
        "openai/main-model",
        api_base="http://x",
        api_key="k",
        fallbacks=[ModelTarget("openai/backup-model", "http://y", "", "agent.fallbacks[0]")],
    )


def test_chain_follows_the_sessions_model():
    c = client()
    assert chain(c) is None  # no choice: the configured chain
    token = CHOICE.set(Choice(c, "openai/fast-model"))
    try:
        assert chain(c) == [2, 1] and chain(c) == [2, 1]  # added once
        assert c.targets[2] == ModelTarget("openai/fast-model", "http://x", "k", "agent.models")
        assert chain(client()) is None  # another client keeps its own chain
    finally:
        CHOICE.reset(token)
    token = CHOICE.set(Choice(c, "openai/backup-model"))
    try:
        assert chain(c) == [1]  # a fallback chosen: the other fallbacks after it (none)
    finally:
        CHOICE.reset(token)
    assert c._order() == [0, 1]  # the configured chain never includes a session's model
