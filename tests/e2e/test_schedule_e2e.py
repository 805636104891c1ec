"""Schedules that keep their word (SPEC §17.5, issue 26) through the real daemon,
python-telegram-bot against the fake Bot API, and the fake LLM.  Real waits are a few
seconds: the jobs are due a few seconds after they are made.  Each case checks the ledger
rows; /cron's refusal for a guest has its twin, the owner's /cron."""

from __future__ import annotations

import asyncio
import time
from datetime import datetime

from tests.e2e import eventually, make_config, running, telegram_section
from tests.fakes.llm import text, tool_calls

OWNER, GUEST = 42, 555
PROMPT = "Remind me to water the plants."


def cfg_for(tmp_path, llm, tg, cron: list[dict] | None = None):
    section = telegram_section(tg, dm_policy="open")
    return make_config(
        tmp_path, llm, channels=section, cron=cron or [], tools={"enabled": ["cron"]}
    )


def soon(seconds: float) -> str:
    """A local ISO time ``seconds`` from now (whole seconds, rounded up)."""
    return datetime.fromtimestamp(int(time.time() + seconds) + 1).isoformat()


def job(name: str, **kind) -> dict:
    return {"name": name, "prompt": PROMPT, "target": "telegram", "to": str(OWNER), **kind}


def rows(d, name: str | None = None) -> list[tuple]:
    return [
        (r["job"], r["status"], r["reason"] or r["detail"],
         "manual" if r["manual"] else "catch-up" if r["catch_up"] else "")
        for r in d.store.ledger_rows(name)
    ]  # fmt: skip


def visible(tg) -> list[str]:
    return [m.visible_text for m in tg.sent]


async def _say(tg, n: int, chat: int, words: str) -> str:
    tg.inject_message(chat, words, from_id=chat)
    return (await tg.wait_for_sent(n, timeout=15))[n - 1].visible_text


async def test_a_reminder_in_a_few_seconds_is_delivered_once(tmp_path, llm, tg):
    llm.script(
        tool_calls([("cron", {"action": "add", "name": "tea", "prompt": "Tea!", "in": "3s"})]),
        text("I'll remind you."),
        text("Your tea is ready."),
    )
    async with running(cfg_for(tmp_path, llm, tg)) as d:
        assert await _say(tg, 1, OWNER, "remind me in 3 seconds about tea") == "I'll remind you."
        tool_answer = str(llm.requests[1]["messages"])
        assert "Scheduled job 'tea'; next run " in tool_answer  # Chela's time, not the model's
        sent = await tg.wait_for_sent(2, timeout=15)
        assert sent[1].chat_id == OWNER and sent[1].visible_text == "Your tea is ready."
        await eventually(lambda: rows(d, "tea") and rows(d, "tea")[0][1] == "ran")
        await asyncio.sleep(1.5)  # a second delivery would show now
        assert len(tg.sent) == 2
        assert rows(d, "tea") == [("tea", "ran", "delivered", "")]
        assert d.store.cron_jobs() == []  # a one-shot job removes itself


async def test_run_now_runs_once_and_is_marked_manual(tmp_path, llm, tg):
    llm.script(text("Water the plants now."))
    cfg = cfg_for(tmp_path, llm, tg, [job("plants", every="1h")])
    async with running(cfg) as d:
        await d.cron.booted.wait()
        answer = await _say(tg, 1, OWNER, "/cron run plants")
        assert answer.startswith("Running plants now")
        await tg.wait_for_sent(2, timeout=15)
        await eventually(lambda: rows(d) and rows(d)[0][1] == "ran")
        await asyncio.sleep(1)
        assert visible(tg)[1:] == ["Water the plants now."]
        assert rows(d) == [("plants", "ran", "delivered", "manual")]
        assert len(llm.requests) == 1


async def test_pause_stops_deliveries_and_the_twin_is_delivered(tmp_path, llm, tg):
    llm.default = lambda req: text("Water the plants now.")
    due = soon(3)
    cfg = cfg_for(tmp_path, llm, tg, [job("paused", at=due), job("twin", at=due)])
    async with running(cfg) as d:
        await d.cron.booted.wait()
        assert await _say(tg, 1, OWNER, "/cron pause paused") == "paused is paused now."
        await eventually(lambda: len(rows(d)) == 2 and rows(d, "twin")[0][1] == "ran", 15)
        await asyncio.sleep(1)
        assert rows(d, "paused") == [("paused", "skipped", "paused", "")]
        assert rows(d, "twin") == [("twin", "ran", "delivered", "")]
        assert visible(tg)[1:] == ["Water the plants now."]  # the twin's, once


async def test_a_daemon_down_across_a_due_time_catches_up_once_or_tells_the_owner(
    tmp_path, llm, tg
):
    llm.default = lambda req: text("Water the plants now.")
    due = soon(2)
    cfg = cfg_for(
        tmp_path,
        llm,
        tg,
        [job("inside", at=due), job("outside", at=due, catch_up="1s")],
    )
    async with running(cfg) as d:
        await d.cron.booted.wait()  # both jobs seen: their creation is this start
    await asyncio.sleep(4.5)  # down while they fall due
    async with running(cfg) as d:
        await d.cron.booted.wait()
        await tg.wait_for_sent(2, timeout=15)
        await eventually(lambda: rows(d, "inside") and rows(d, "inside")[0][1] == "ran")
        await asyncio.sleep(1.5)
        assert rows(d, "inside") == [("inside", "ran", "delivered", "catch-up")]
        assert rows(d, "outside") == [("outside", "missed", "", "")]
        hhmm = due[11:16]
        assert sorted(visible(tg)) == sorted(
            ["Water the plants now.", f"Missed while I was down: outside (due {hhmm})"]
        )
        assert len(llm.requests) == 1  # one catch-up run; the note is not a turn
    async with running(cfg) as d:  # a third start: nothing left to catch up or note
        await d.cron.booted.wait()
        await asyncio.sleep(1)
        assert len(tg.sent) == 2 and len(rows(d)) == 2
    # chela status: both one-shots ended within the day, each with its last ledger result
    from bot.cli.status import status_text

    lines = status_text(cfg).splitlines()
    inside = next(ln for ln in lines if ln.startswith("inside"))
    outside = next(ln for ln in lines if ln.startswith("outside"))
    assert "ended" in inside and f"ran {due[11:16]} (catch-up, delivered)" in inside
    assert "ended" in outside and f"missed {due[11:16]}" in outside


async def test_cron_is_the_owners_and_a_guest_is_refused(tmp_path, llm, tg):
    cfg = cfg_for(tmp_path, llm, tg, [job("plants", every="1h")])
    async with running(cfg) as d:
        await d.cron.booted.wait()
        refused = await _say(tg, 1, GUEST, "/cron pause plants")
        assert refused == "Only the owner can use /cron."
        assert not d.cron.paused("plants")
        # the twin: the owner lists and pauses
        listing = await _say(tg, 2, OWNER, "/cron")
        assert "plants [every 1h] config, active; next " in listing
        assert await _say(tg, 3, OWNER, "/cron pause plants") == "plants is paused now."
        assert d.cron.paused("plants")
        assert "config, paused" in await _say(tg, 4, OWNER, "/cron list")
        removed = await _say(tg, 5, OWNER, "/cron remove plants")
        assert "edit config.toml" in removed
    assert llm.requests == []
