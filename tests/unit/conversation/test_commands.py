"""The command table (bot.conversation.commands): ``CommandCall → Replies`` with an in-memory
store and a tiny agent, no daemon.  Each refusal has its twin (the same command where and by
whom it is allowed); the e2e proofs are tests/e2e/test_commands_e2e.py and tests/e2e/test_trust_e2e.py."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import pytest

from bot.rules.admission import Verdict
from bot.config import parse_config
from bot.conversation.commands import (
    COMMANDS,
    TABLE,
    CommandPorts,
    command_call,
    menu,
    parse_command,
    run_command,
)
from bot.conversation.commands.help import help_text
from bot.conversation.commands.unknown import UNKNOWN
from bot.conversation.types import CommandCall, Replies
from bot.store import Store
from channels.base import InboundMessage

OWNER, STRANGER, GROUP = "42", "555", "-100"
CFG = parse_config({"channels": {"telegram": {"allow_from": [OWNER], "groups": [GROUP]}}})


@dataclass
class FakeAgent:
    calls: list[tuple[str, str]] = field(default_factory=list)
    cache: Any = None

    def prompt_context(self, req: Any) -> Any:
        raise AssertionError("not used here")

    async def context_usage(self, req: Any) -> dict[str, Any]:
        self.calls.append(("context_usage", req))
        return {"used": 12, "budget": 100, "window": 1000, "compactions": 0}

    async def compact_now(self, req: Any, focus: str = "") -> str:
        self.calls.append(("compact_now", focus))
        return f"Compacted (focus: {focus})"


@dataclass
class FakeApprovals:
    answered: list[tuple[str, bool]] = field(default_factory=list)

    def answer(self, code: str, approve: bool) -> str:
        self.answered.append((code, approve))
        return f"{'approved' if approve else 'denied'} {code}"


@pytest.fixture
def ports():
    store = Store(":memory:")
    yield CommandPorts(
        CFG,
        store,
        FakeAgent(),
        turn_request=lambda call: call.key,  # what the fake agent is handed back
        approvals=FakeApprovals(),
    )
    store.close()


def message(text: str, sender: str, where: str) -> InboundMessage:
    if where == "group":
        return InboundMessage(
            channel="telegram", chat_id=GROUP, sender_id=sender, text=text, chat_type="group"
        )
    return InboundMessage(channel="telegram", chat_id=sender, sender_id=sender, text=text)


def call(text: str, sender: str = OWNER, where: str = "direct", now: bool = True) -> CommandCall:
    trust = "owner" if sender == OWNER and where == "direct" else "guest"
    made = command_call(
        message(text, sender, where),
        CFG,
        f"s:{sender}:{where}",
        Verdict("serve", trust),
        on_arrival=now,
    )
    assert made is not None, text
    return made


async def answer(c: CommandCall, ports: CommandPorts) -> str:
    replies = await run_command(c, ports)
    assert isinstance(replies, Replies) and len(replies.texts) == 1
    return replies.texts[0]


# ------------------------------------------------------------------ refusals and twins
WRONG_CHAT = {
    "group": "only applies in group chats.",
    "direct": "only works in a direct chat with me.",
}
OTHER = {"group": "direct", "direct": "group"}
PLACED = [s for s in TABLE if s.where != "any"]
OWNER_ONLY = [s for s in TABLE if s.owner_only]


def test_the_table_holds_the_refusals_of_today():
    assert [s.name for s in PLACED] == ["activation", "approve", "deny", "pair"]
    assert [s.name for s in OWNER_ONLY] == [
        "activation",
        "approve",
        "deny",
        "model",
        "think",
        "pair",
        "cron",
    ]
    assert [s.name for s in TABLE if s.immediate] == ["approve", "deny", "stop", "pair", "cron"]


@pytest.mark.parametrize("spec", PLACED, ids=lambda s: s.name)
async def test_a_command_in_the_wrong_kind_of_chat_is_refused_and_does_nothing(spec, ports):
    text = f"/{spec.name} always"
    got = await answer(call(text, OWNER, OTHER[spec.where]), ports)
    assert got == f"/{spec.name} {WRONG_CHAT[spec.where]}"
    assert ports.approvals.answered == []
    assert ports.store.session(f"s:{OWNER}:{OTHER[spec.where]}")["activation"] is None


@pytest.mark.parametrize("spec", OWNER_ONLY, ids=lambda s: s.name)
async def test_an_owner_only_command_from_someone_else_is_refused_and_does_nothing(spec, ports):
    got = await answer(call(f"/{spec.name} always", STRANGER, spec.where), ports)
    assert got == f"Only the owner can use /{spec.name}."
    assert ports.approvals.answered == []
    assert ports.store.session(f"s:{STRANGER}:{spec.where}")["activation"] is None


TWINS = [  # the owner, in the right kind of chat
    ("/activation always", "group", "I'll read everything here and answer when it's useful."),
    ("/activation mention", "group", "I'll answer here only when mentioned."),
    ("/activation sometimes", "group", "Usage: /activation mention|always"),
    ("/approve abc123", "direct", "approved abc123"),
    ("/deny XYZ", "direct", "denied XYZ"),
]


@pytest.mark.parametrize(("text", "where", "expected"), TWINS)
async def test_the_owner_in_the_right_chat_is_answered(text, where, expected, ports):
    assert await answer(call(text, OWNER, where), ports) == expected


async def test_activation_is_stored_for_the_session(ports):
    await answer(call("/activation ALWAYS", OWNER, "group"), ports)
    assert ports.store.session(f"s:{OWNER}:group")["activation"] == "always"


@pytest.mark.parametrize("name", ["approve", "deny"])
async def test_an_approval_code_from_the_lane_is_no_longer_waiting(name, ports):
    """Answered later than on arrival (after a restart): the wait it answered is gone."""
    got = await answer(call(f"/{name} ABC", now=False), ports)
    assert got == "That approval code is no longer waiting."
    assert ports.approvals.answered == []


async def test_without_approvals_nothing_is_waiting(ports):
    bare = CommandPorts(ports.cfg, ports.store, ports.agent, turn_request=lambda c: c.key)
    assert await answer(call("/approve ABC"), bare) == "No command is waiting for approval."


# ---------------------------------------------------------- commands anyone may use anywhere
async def test_new_and_reset_start_afresh_for_a_guest_in_a_group(ports):
    key = f"s:{STRANGER}:group"
    for name in ("new", "reset"):
        epoch = ports.store.session(key)["epoch"]
        assert await answer(call(f"/{name}", STRANGER, "group"), ports) == (
            "Started a fresh conversation."
        )
        assert ports.store.session(key)["epoch"] == epoch + 1


async def test_status_and_compact_reach_the_agent_with_the_session(ports):
    got = await answer(call("/status", STRANGER, "group"), ports)
    assert f"Session: s:{STRANGER}:group" in got and "Context: 12 / 100 tokens" in got
    assert await answer(call("/compact the plan", STRANGER, "group"), ports) == (
        "Compacted (focus: the plan)"
    )
    assert ports.agent.calls == [
        ("context_usage", f"s:{STRANGER}:group"),
        ("compact_now", "the plan"),
    ]


async def test_usage_answers_a_guest(ports):
    assert "This conversation today" in await answer(call("/usage", STRANGER, "group"), ports)


# ------------------------------------------------------------------------------ help
async def test_help_lists_per_sender_from_the_table(ports):
    owner = await answer(call("/help", OWNER, "direct"), ports)
    guest = await answer(call("/help", STRANGER, "group"), ports)
    assert owner == help_text(TABLE, owner=True)
    assert guest == help_text(TABLE, owner=False)
    assert guest.splitlines() == [
        "Commands:",
        "/new or /reset: start a fresh conversation",
        "/status: model, session and usage",
        "/context [list|detail|json]: what the system prompt is made of",
        "/compact [focus]: summarize the older part of this conversation now",
        "/stop: stop the answer being written now",
        "/usage: tokens and cost of today's model calls",
        "/help: this list",
    ]
    for spec in OWNER_ONLY:
        assert f"{spec.usage}: {spec.help} (owner only)" in owner.splitlines()
        assert spec.usage not in guest


# --------------------------------------------------------------------- parsing, unknown
@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("/help", ("help", "")),
        ("  /Compact@chela_bot   the plan  ", ("compact", "the plan")),
        ("/approve abc", ("approve", "abc")),
        ("/nope", None),  # not ours: ordinary text for the model
        ("/", None),
        ("help", None),
        ("", None),
    ],
)
def test_parse_command(text, parsed):
    assert parse_command(text) == parsed


async def test_an_unknown_command_is_answered_by_the_core_not_the_model(ports):
    got = await answer(call("/stauts", OWNER, "direct"), ports)
    lines = got.splitlines()
    assert lines[0] == "Unknown command /stauts. Did you mean /status?"
    assert lines[1].startswith("Commands: /new /reset /status") and "/cron" in lines[1]
    guest = await answer(call("/nope do it", STRANGER, "direct"), ports)
    assert guest.startswith("Unknown command /nope.") and "/cron" not in guest  # theirs only


def test_an_unknown_command_in_a_group_is_answered_only_when_addressed():
    verdict = Verdict("serve", "guest")
    plain = message("/stauts", STRANGER, "group")
    assert command_call(plain, CFG, "k", verdict, on_arrival=True) is None  # not to us
    addressed = message("/stauts@chela_bot", STRANGER, "group")
    addressed.mentioned = True  # the channel says this bot was named (/cmd@thisbot)
    made = command_call(addressed, CFG, "k", verdict, on_arrival=True)
    assert made is not None and made.args == "stauts"


@pytest.mark.parametrize("text", ["/etc/hosts is missing", "hello /status", "/", "/ 12"])
def test_text_with_a_slash_is_not_a_command(text):
    msg = message(text, OWNER, "direct")
    assert command_call(msg, CFG, "k", Verdict("serve", "owner"), on_arrival=True) is None


async def test_an_unknown_name_is_not_answered(ports):
    bogus = CommandCall("nope", "", message("/nope", OWNER, "direct"), "k", Verdict("serve"), True)
    with pytest.raises(KeyError):
        await run_command(bogus, ports)


# ------------------------------------------------------------------------------- menu
def test_the_menu_is_the_table():
    assert menu() == [(s.name, s.help) for s in TABLE]
    listed = [s.name for s in TABLE]
    assert [name for name, _ in menu()] == listed
    assert [n for n in COMMANDS if n != UNKNOWN] == listed  # the unknown answer is no command
    for name, description in menu():  # what Telegram's setMyCommands accepts
        assert re.fullmatch(r"[a-z0-9_]{1,32}", name)
        assert 3 <= len(description) <= 256


def test_an_alias_names_a_command_of_the_table():
    assert [(s.name, s.alias_of) for s in TABLE if s.alias_of] == [("reset", "new")]
    for s in TABLE:
        if s.alias_of:
            assert COMMANDS[s.alias_of].handler is s.handler
