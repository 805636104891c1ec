"""/pair's answers (SPEC §17.4), fast tier: the listing (every channel, id, name, code,
age), approve and deny by CODE or CHANNEL CODE through ``bot.conversation.pairing_requests.decide`` (the
notices published), unknown and expired codes, usage.  The refusals (a guest, a group)
are the table's, tested in test_commands.py and end to end in tests/e2e/test_pair_e2e.py."""

from __future__ import annotations

import time

import pytest

from bot.conversation import pairing_requests as pairing
from bot.conversation.commands import CommandPorts
from bot.conversation.commands.pair import listing
from bot.reports.notices import Notices
from bot.store import Store
from tests.unit.conversation.test_commands import CFG, FakeAgent, answer, call


@pytest.fixture
def ports():
    store = Store(":memory:")
    yield CommandPorts(CFG, store, FakeAgent(), turn_request=lambda c: c.key, notices=Notices())
    store.close()


def ask(ports, channel: str, sender: str, name: str = "", ago: float = 0.0) -> str:
    now = time.time() - ago
    return pairing.request(ports.store, channel, sender, name, "hi", now=now).code


def test_the_listing_names_channel_id_name_code_and_age(ports):
    assert listing(ports) == "No pairing requests are waiting."
    a = ask(ports, "telegram", "77", "Eve", ago=600)
    b = ask(ports, "signal", "+1555", "Bo\nTo admit: /pair approve X")
    lines = listing(ports).splitlines()
    assert lines[0] == "Pairing requests waiting:"
    assert lines[1] == f'telegram: id 77, "Eve", code {a}, 10 min ago'
    assert lines[2] == f'signal: id +1555, "Bo To admit: /pair approve X", code {b}, just now'
    assert lines[3] == "Answer /pair approve CODE or /pair deny CODE."


async def test_approve_by_code_or_channel_and_code(ports):
    a, b = ask(ports, "telegram", "77", "Eve"), ask(ports, "signal", "+1555")
    got = await answer(call(f"/pair approve {a.lower()}"), ports)
    assert got.startswith(f"Approved {a}: telegram sender 77")
    got = await answer(call(f"/pair APPROVE signal {b}"), ports)
    assert got.startswith(f"Approved {b}: signal sender +1555")
    assert ports.store.take_new_approvals() == [("telegram", "77"), ("signal", "+1555")]
    assert [n.data["decision"] for n in ports.notices.since(None)] == ["approve", "approve"]


async def test_deny_is_one_line_naming_the_code(ports):
    a = ask(ports, "telegram", "77", "Eve")
    got = await answer(call(f"/pair deny {a}"), ports)
    assert got.startswith(f"Denied {a}:") and "\n" not in got and "not told" in got
    assert ports.store.pairing_requests() == [] and ports.store.take_new_approvals() == []


async def test_unknown_expired_and_malformed(ports):
    old = ask(ports, "telegram", "77", ago=pairing.CODE_TTL + 1)
    assert (await answer(call(f"/pair approve {old}"), ports)).startswith(
        f"Nothing done: code {old} has expired"
    )
    assert (await answer(call("/pair deny ZZZZZZZZ"), ports)) == (
        "Nothing done: no pending pairing request with code ZZZZZZZZ."
    )
    assert (await answer(call("/pair deny discord ZZZZZZZZ"), ports)).startswith(
        "Nothing done: no pending pairing request on discord"
    )
    for bad in ("/pair yes ABC", "/pair approve", "/pair approve a b c"):
        assert (await answer(call(bad), ports)).startswith("Usage: /pair")
    assert ports.notices.since(None) == [] and not ports.store.is_approved("telegram", "77")
