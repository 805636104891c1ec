"""Pairing from the chat (SPEC §17.4), end to end: fake Telegram → daemon → fake LLM.

A stranger's first message tells the owner once, in the owner's direct chat; the owner
lists, approves or denies with /pair there.  Each refusal (a guest's /pair approve, /pair
in a group) has its twin: the owner's own /pair in their DM does the thing."""

from __future__ import annotations

import logging

import pytest

from bot.store import Store
from tests.e2e import eventually, make_config, running, telegram_section
from tests.e2e.harness import settled, tg_taken
from tests.fakes.llm import text

OWNER, STRANGER, GUEST = 42, 77, 55
GROUP = -1001


@pytest.fixture
def fast_pairing(monkeypatch):
    monkeypatch.setattr("bot.app.daemon.PAIRING_POLL", 0.05)


def cfg_for(tmp_path, llm, tg, **tg_kw):
    tg_kw.setdefault("groups", [str(GROUP)])
    return make_config(tmp_path, llm, channels=telegram_section(tg, **tg_kw))


def to(tg, chat: int) -> list[str]:
    return [m.visible_text for m in tg.sent if m.chat_id == chat]


def notices(tg) -> list[str]:
    return [t for t in to(tg, OWNER) if t.startswith("Pairing request")]


async def stranger_asks(tg, words: str = "hello, it's Eve from the climbing club") -> str:
    """STRANGER writes; returns the code of the owner's one notice."""
    tg.inject_message(STRANGER, words, from_id=STRANGER, first_name="Eve")
    found = await tg.wait_for(lambda: notices(tg), timeout=15)
    return found[-1].split("Code: ")[1][:8]


async def owner_says(tg, words: str, chat: int = OWNER, **kw) -> str:
    before = len(to(tg, chat))
    tg.inject_message(chat, words, from_id=OWNER, **kw)
    got = await tg.wait_for(lambda: to(tg, chat)[before:], timeout=15)
    return got[0]


async def test_the_owner_is_told_once_and_approves_from_the_chat(tmp_path, llm, tg, fast_pairing):
    cfg = cfg_for(tmp_path, llm, tg)
    llm.script(text("Hi Eve, nice to meet you."))
    async with running(cfg) as d:
        code = await stranger_asks(tg, "hello, it's Eve " + "x" * 400)
        notice = notices(tg)[0]
        assert "telegram" in notice and str(STRANGER) in notice and '"Eve"' in notice
        assert "hello, it's Eve" in notice and "x" * 300 not in notice  # cut at 200
        assert f"/pair approve {code}" in notice
        assert "Pairing code: " + code in to(tg, STRANGER)[0]
        # more messages from the stranger while the request waits: nobody is told again
        tg.inject_message(STRANGER, "are you there?", from_id=STRANGER, first_name="Eve")
        await settled(d, tg_taken(tg))
        assert len(notices(tg)) == 1 and len(to(tg, STRANGER)) == 1
        listing = await owner_says(tg, "/pair")
        assert code in listing and str(STRANGER) in listing and "telegram" in listing
        confirm = await owner_says(tg, f"/pair approve {code}")
        assert confirm.startswith(f"Approved {code}") and str(STRANGER) in confirm
        await tg.wait_for(lambda: len(to(tg, STRANGER)) >= 3, timeout=15)
        assert d.store.is_approved("telegram", str(STRANGER))
    told, answered = to(tg, STRANGER)[1:]
    assert "approved" in told and answered == "Hi Eve, nice to meet you."
    assert "are you there?" in str(llm.requests[0]["messages"])  # the waiting message
    assert len(llm.requests) == 1  # commands and notices never reach the model


async def test_the_owner_denies_and_the_stranger_is_not_told(tmp_path, llm, tg, fast_pairing):
    async with running(cfg_for(tmp_path, llm, tg)) as d:
        code = await stranger_asks(tg)
        confirm = await owner_says(tg, f"/pair deny telegram {code}")
        assert code in confirm and "\n" not in confirm
        assert d.store.pairing_requests() == []
        await settled(d, tg_taken(tg))
        again = await owner_says(tg, f"/pair approve {code}")  # the code is gone
        assert "no pending pairing request" in again and code in again
        assert not d.store.is_approved("telegram", str(STRANGER))
    assert to(tg, STRANGER) == [to(tg, STRANGER)[0]]  # only the pairing reply
    assert llm.requests == []


async def test_a_guest_cannot_approve_and_the_owner_can(tmp_path, llm, tg, fast_pairing):
    cfg = cfg_for(tmp_path, llm, tg)
    seed = Store(cfg.db_path)
    seed.approve("telegram", str(GUEST))  # a paired guest from an earlier day
    seed.take_new_approvals()
    seed.close()
    llm.script(text("welcome"))
    async with running(cfg) as d:
        code = await stranger_asks(tg)
        tg.inject_message(GUEST, f"/pair approve {code}", from_id=GUEST)
        refused = await tg.wait_for(lambda: to(tg, GUEST), timeout=15)
        assert refused == ["Only the owner can use /pair."]
        await settled(d, tg_taken(tg))
        assert not d.store.is_approved("telegram", str(STRANGER))
        assert [r["code"] for r in d.store.pairing_requests()] == [code]
        assert to(tg, STRANGER) == [to(tg, STRANGER)[0]] and llm.requests == []
        # twin: the owner's own /pair approve admits them
        await owner_says(tg, f"/pair approve {code}")
        await tg.wait_for(lambda: len(to(tg, STRANGER)) == 3, timeout=15)
        assert d.store.is_approved("telegram", str(STRANGER))


async def test_pair_in_a_group_is_refused_even_for_the_owner(tmp_path, llm, tg, fast_pairing):
    async with running(cfg_for(tmp_path, llm, tg)) as d:
        code = await stranger_asks(tg)
        group = {"chat_type": "supergroup", "title": "Club"}
        answer = await owner_says(tg, f"/pair approve {code}", chat=GROUP, **group)
        assert answer == "/pair only works in a direct chat with me."
        tg.inject_message(GROUP, "/pair", from_id=GUEST, **group)
        await tg.wait_for(lambda: len(to(tg, GROUP)) == 2, timeout=15)
        assert code not in to(tg, GROUP)[1]  # nobody in the group sees the list
        await settled(d, tg_taken(tg))
        assert not d.store.is_approved("telegram", str(STRANGER))
        # twin: the same owner in their direct chat
        assert code in await owner_says(tg, "/pair")
    assert llm.requests == []


async def test_without_an_owner_route_only_a_log_line_tells(tmp_path, llm, tg, caplog):
    caplog.set_level(logging.INFO, logger="chela.conversation")
    async with running(cfg_for(tmp_path, llm, tg, allow_from=[])) as d:
        tg.inject_message(STRANGER, "hi", from_id=STRANGER)
        await tg.wait_for_sent(1, timeout=15)
        await eventually(lambda: "no owner route" in caplog.text)
        await settled(d, tg_taken(tg))
    assert [m.chat_id for m in tg.sent] == [STRANGER]


async def test_a_stranger_cannot_approve_their_own_code(tmp_path, llm, tg, fast_pairing):
    llm.script(text("hello Eve"))
    async with running(cfg_for(tmp_path, llm, tg)) as d:
        code = await stranger_asks(tg)
        tg.inject_message(STRANGER, f"/pair approve {code}", from_id=STRANGER, first_name="Eve")
        tg.inject_message(STRANGER, f"/pair approve telegram {code}", from_id=STRANGER)
        await settled(d, tg_taken(tg))
        assert not d.store.is_approved("telegram", str(STRANGER))
        assert len(to(tg, STRANGER)) == 1 and len(notices(tg)) == 1 and llm.requests == []
        # twin: the owner's approval; the held message (their last /pair) is answered as
        # a guest's command: refused, nothing else approved, no model call
        await owner_says(tg, f"/pair approve {code}")
        await tg.wait_for(lambda: len(to(tg, STRANGER)) >= 3, timeout=15)
        assert d.store.is_approved("telegram", str(STRANGER))
    assert to(tg, STRANGER)[2] == "Only the owner can use /pair."
    assert llm.requests == []
