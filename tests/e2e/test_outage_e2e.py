"""Model outages end to end: the real daemon, the Telegram wire fake and the fake LLM made
"down" for a window.  Messages sent while no model answers are kept, each chat is told once,
and every one is answered once the model is back, in arrival order per chat."""

from __future__ import annotations

import re
from collections import defaultdict

from bot.conversation.outage import NOTICE
from bot.store import pending
from tests.e2e import eventually, make_config, running, telegram_section
from tests.fakes.llm import drop, error, last_user_text, text

CHATS = (42, 43, 44)
TOKEN = re.compile(r"c(\d+)-m(\d+)")


def outage_config(tmp_path, llm, tg, **outage):
    return make_config(
        tmp_path,
        llm,
        agent={"llm_max_retries": 0},
        session={"dm_scope": "per-peer"},
        channels=telegram_section(tg, allow_from=[str(c) for c in CHATS]),
        outage={"probe_initial": "50ms", "probe_max": "200ms", **outage},
    )


def echo(request: dict):
    """The model back: it answers each message with the message's token."""
    found = TOKEN.findall(last_user_text(request))
    return text("re " + (f"c{found[-1][0]}-m{found[-1][1]}" if found else "?"))


def answers(tg) -> dict[int, list[str]]:
    """The answers each chat got, in the order they were sent."""
    out: dict[int, list[str]] = defaultdict(list)
    for s in tg.sent:
        if (s.text or "").startswith("re "):
            out[int(s.chat_id)].append(s.text[3:])
    return out


def notices(tg) -> list[int]:
    return [int(s.chat_id) for s in tg.sent if s.text == NOTICE]


def waiting(d) -> int:
    return len(pending.waiting(d.store))


async def test_messages_during_an_outage_are_answered_after_it_once_in_order(tmp_path, llm, tg):
    cfg = outage_config(tmp_path, llm, tg)
    async with running(cfg) as d:
        llm.go_down()
        for i in range(3):
            for chat in CHATS:
                tg.inject_message(chat, f"c{chat}-m{i}", from_id=chat)
        await eventually(lambda: waiting(d) == 9, timeout=15)
        assert pending.view(d.store)["pending"] == 9
        assert pending.down_since(d.store) is not None
        assert sorted(notices(tg)) == list(CHATS)  # one notice per chat, not per message
        assert not answers(tg)
        # the outage is known: a new message is kept without asking the model
        tg.inject_message(42, "c42-m3", from_id=42)
        await eventually(lambda: waiting(d) == 10, timeout=15)
        assert not any("c42-m3" in last_user_text(r) for r in llm.requests)
        asked = len(llm.requests)
        llm.come_up(echo)
        await eventually(lambda: sum(map(len, answers(tg).values())) == 10, timeout=15)
        got = answers(tg)
        for chat in CHATS:
            n = 4 if chat == 42 else 3
            assert got[chat] == [f"c{chat}-m{i}" for i in range(n)]  # in order, each once
        assert sorted(notices(tg)) == list(CHATS)
        assert pending.view(d.store) is None
        # the probe went through the gate: its usage is recorded
        probes = d.store.db.execute(
            "SELECT COUNT(*) FROM usage WHERE session_key=?", ("outage:probe",)
        ).fetchone()[0]
        assert probes >= 1 and len(llm.requests) >= asked + 10


async def test_new_during_an_outage_drops_the_kept_messages_and_says_so(tmp_path, llm, tg):
    cfg = outage_config(tmp_path, llm, tg)
    async with running(cfg) as d:
        llm.go_down(drop())  # connections break: an outage too
        tg.inject_message(42, "c42-m0", from_id=42)
        tg.inject_message(43, "c43-m0", from_id=43)
        await eventually(lambda: waiting(d) == 2, timeout=15)
        tg.inject_message(42, "/new", from_id=42)
        await eventually(lambda: any("were dropped" in (s.text or "") for s in tg.sent))
        said = [s.text for s in tg.sent if "were dropped" in (s.text or "")]
        assert said == [
            "Started a fresh conversation. 1 message(s) waiting for the model were dropped."
        ]
        llm.come_up(echo)
        # the twin: the other chat's kept message is still answered
        await eventually(lambda: answers(tg).get(43) == ["c43-m0"], timeout=15)
        assert 42 not in answers(tg)


async def test_a_message_kept_past_max_wait_gets_one_line_and_no_late_answer(tmp_path, llm, tg):
    cfg = outage_config(tmp_path, llm, tg, max_wait="2s")
    async with running(cfg) as d:
        llm.go_down()
        tg.inject_message(42, "c42-m0", from_id=42)
        tg.inject_message(42, "c42-m1", from_id=42)
        # both kept before the first can expire (300 ms let a loaded run expire them apart)
        await eventually(lambda: waiting(d) == 2, timeout=15)
        await eventually(lambda: any("won't answer it late" in (s.text or "") for s in tg.sent))
        lines = [s for s in tg.sent if "won't answer it late" in (s.text or "")]
        assert len(lines) == 1 and int(lines[0].chat_id) == 42
        llm.come_up(echo)
        await eventually(lambda: pending.view(d.store) is None, timeout=15)
        tg.inject_message(42, "c42-m2", from_id=42)  # the next message is answered at once
        await eventually(lambda: answers(tg).get(42) == ["c42-m2"], timeout=15)
        assert len([s for s in tg.sent if "won't answer it late" in (s.text or "")]) == 1


async def test_a_model_failing_again_mid_drain_loses_and_doubles_nothing(tmp_path, llm, tg):
    cfg = outage_config(tmp_path, llm, tg)
    async with running(cfg) as d:
        llm.go_down()
        for i in range(4):
            tg.inject_message(42, f"c42-m{i}", from_id=42)
        await eventually(lambda: waiting(d) == 4, timeout=15)
        served = []

        def flaky(request: dict):  # answers the probe and two messages, then fails again
            if not TOKEN.search(last_user_text(request)):
                return text("OK") if not served else error(503)
            if len(served) >= 2:
                return error(503)
            served.append(1)
            return echo(request)

        llm.come_up(flaky)
        await eventually(lambda: len(answers(tg).get(42, [])) == 2, timeout=15)
        await eventually(lambda: waiting(d) == 2, timeout=15)
        assert pending.down_since(d.store) is not None  # a second outage
        llm.come_up(echo)
        await eventually(lambda: len(answers(tg).get(42, [])) == 4, timeout=15)
        assert answers(tg)[42] == [f"c42-m{i}" for i in range(4)]


async def test_a_refused_request_is_not_an_outage(tmp_path, llm, tg):
    cfg = outage_config(tmp_path, llm, tg)
    async with running(cfg) as d:
        llm.script(error(400))
        tg.inject_message(42, "c42-m0", from_id=42)
        await eventually(lambda: any("rejected the request" in (s.text or "") for s in tg.sent))
        llm.script(error(401))
        tg.inject_message(42, "c42-m1", from_id=42)
        await eventually(lambda: any("rejected the API key" in (s.text or "") for s in tg.sent))
        assert not notices(tg) and waiting(d) == 0 and pending.down_since(d.store) is None
        # the twin: a 500 is one
        llm.go_down()
        tg.inject_message(42, "c42-m2", from_id=42)
        await eventually(lambda: notices(tg) == [42], timeout=15)
        assert waiting(d) == 1


async def test_a_restart_during_an_outage_keeps_the_messages(tmp_path, llm, tg):
    cfg = outage_config(tmp_path, llm, tg)
    async with running(cfg) as d:
        llm.go_down()
        tg.inject_message(42, "c42-m0", from_id=42)
        await eventually(lambda: waiting(d) == 1, timeout=15)
    llm.come_up(echo)
    async with running(cfg) as d:
        await eventually(lambda: answers(tg).get(42) == ["c42-m0"], timeout=15)
        assert notices(tg) == [42]
