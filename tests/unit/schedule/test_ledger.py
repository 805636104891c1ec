"""Every due occurrence ends as exactly one ledger row (SPEC §17.5), on a manual clock: ran,
skipped (paused, session busy), missed, catch-up inside the window with the older ones
superseded, the owner's note outside it, run_now, one-shot removal, the every-grid across a
restart, a heartbeat never caught up, and a run a killed daemon left behind."""

from __future__ import annotations

import asyncio

import pytest

from bot.schedule import Conflict
from bot.rules.keys import main_key
from tests.unit.delivery.memory import until
from tests.unit.schedule.helpers import OWNER, T0, ScriptedAgent, config, job, rig

pytestmark = pytest.mark.timeout(30)


def texts(r) -> list[str]:
    return [m.text for m in r.channel.sent]


async def test_an_occurrence_on_time_runs_and_is_delivered(tmp_path):
    r = await rig(tmp_path, config(tmp_path, [job(every="1h")]))
    await r.advance(3600)
    await until(lambda: r.channel.sent)
    assert r.rows() == [(3600.0, "ran", "delivered", "")]
    assert texts(r) == ["Time to water the plants"] and r.channel.sent[0].chat_id == OWNER
    await r.close()


async def test_paused_occurrences_are_skipped_and_resume_causes_no_catch_up(tmp_path):
    r = await rig(tmp_path, config(tmp_path, [job(every="1h")]))
    assert r.svc.pause("plants") is True and r.svc.pause("plants") is False
    await r.advance(3600)
    await r.advance(3600)
    assert r.svc.resume("plants") is True
    await r.advance(60)  # resuming runs nothing
    assert r.agent.calls == []
    await r.advance(3540)
    assert r.rows() == [
        (3600.0, "skipped", "paused", ""),
        (7200.0, "skipped", "paused", ""),
        (10800.0, "ran", "delivered", ""),
    ]
    await r.close()


async def test_a_run_still_going_at_the_next_occurrence_makes_it_skipped_busy(tmp_path):
    agent = ScriptedAgent()
    agent.gate = asyncio.Event()
    r = await rig(tmp_path, config(tmp_path, [job(every="10s")]), agent=agent)
    await r.clock.advance(10)
    await until(lambda: agent.calls)
    await r.clock.advance(10)
    agent.gate.set()
    await r.settled()
    assert r.rows() == [(10.0, "ran", "delivered", ""), (20.0, "skipped", "session busy", "")]
    assert len(agent.calls) == 1
    await r.close()


async def test_down_past_the_window_everything_is_missed_and_the_owner_told_once(tmp_path):
    cfg = config(tmp_path, [job(every="1h", catch_up="30m"), job("brief", schedule="0 7 * * *")])
    r = await rig(tmp_path, cfg)
    await r.close()  # down from 08:00 to 11:45
    r = await rig(tmp_path, cfg, at=T0 + 3 * 3600 + 45 * 60)
    await until(lambda: r.channel.sent)
    assert r.rows() == [
        (3600.0, "missed", "", ""),
        (7200.0, "missed", "", ""),
        (10800.0, "missed", "", ""),
    ]
    assert r.agent.calls == []
    note = "Missed while I was down: plants (due 09:00, 10:00, 11:00)"
    assert texts(r) == [note]
    stored = r.store.transcript(main_key("main"))
    assert [m.get("content") for m in stored] == [note]  # a note, not a turn
    await r.close()


async def test_down_inside_the_window_one_catch_up_and_the_older_ones_superseded(tmp_path):
    cfg = config(tmp_path, [job(every="1h")])
    r = await rig(tmp_path, cfg)
    await r.close()
    r = await rig(tmp_path, cfg, at=T0 + 3 * 3600 + 10 * 60)
    await until(lambda: r.channel.sent)
    await r.settled()
    assert r.rows() == [
        (3600.0, "missed", "superseded by catch-up", ""),
        (7200.0, "missed", "superseded by catch-up", ""),
        (10800.0, "ran", "delivered", "catch-up"),
    ]
    assert len(r.agent.calls) == 1 and texts(r) == ["Time to water the plants"]
    await r.close()


async def test_run_now_is_one_manual_run_and_the_schedule_does_not_move(tmp_path):
    r = await rig(tmp_path, config(tmp_path, [job(every="1h")]))
    before = r.svc.next_run(r.svc.registry.get("plants"))
    await r.advance(600)
    run_id = await r.svc.run_now("plants")
    assert run_id
    await r.settled()
    assert r.rows() == [(600.0, "ran", "delivered", "manual")]
    assert r.svc.next_run(r.svc.registry.get("plants")) == before == T0 + 3600
    with pytest.raises(KeyError):
        await r.svc.run_now("nope")
    await r.close()


async def test_run_now_while_running_is_a_conflict(tmp_path):
    agent = ScriptedAgent()
    agent.gate = asyncio.Event()
    r = await rig(tmp_path, config(tmp_path, [job(every="1h")]), agent=agent)
    await r.svc.run_now("plants")
    with pytest.raises(Conflict):
        await r.svc.run_now("plants")
    agent.gate.set()
    await r.settled()
    assert [row[1:] for row in r.rows()] == [("ran", "delivered", "manual")]
    await r.close()


async def test_a_reminder_in_2m_runs_once_and_removes_itself(tmp_path):
    r = await rig(tmp_path, config(tmp_path))
    api = r.svc.for_route({"channel": "telegram", "chat_id": OWNER, "account": "default"})
    answer = await api.add("tea", "Tea is ready.", **{"in": "2m"})
    assert (
        answer
        == "Scheduled job 'tea'; next run 2027-01-15 08:02 UTC; it will be sent to this chat."
    )
    assert [j["name"] for j in r.store.cron_jobs()] == ["tea"]
    await r.advance(120)
    await until(lambda: r.channel.sent)
    await r.advance(3600)
    assert r.rows() == [(120.0, "ran", "delivered", "")]
    assert r.store.cron_jobs() == [] and r.svc.registry.get("tea") is None
    assert [m.chat_id for m in r.channel.sent] == [OWNER]  # back to the chat it came from
    await r.close()


async def test_the_every_grid_stays_anchored_across_a_restart(tmp_path):
    cfg = config(tmp_path, [job(every="10m")])
    r = await rig(tmp_path, cfg)
    await r.advance(600)
    await r.close()
    r = await rig(tmp_path, cfg, at=T0 + 1500)  # down over 1200: a catch-up (inside 1h)
    await r.settled()
    await r.advance(300)  # T0 + 1800 is on the grid of the first start, not 1500 + 600
    assert r.rows() == [
        (600.0, "ran", "delivered", ""),
        (1200.0, "ran", "delivered", "catch-up"),
        (1800.0, "ran", "delivered", ""),
    ]
    await r.close()


async def test_a_missed_heartbeat_is_never_caught_up_nor_noted(tmp_path):
    cfg = config(tmp_path, heartbeat="30m")
    r = await rig(tmp_path, cfg)
    await r.close()
    r = await rig(tmp_path, cfg, at=T0 + 3600 + 60 * 5)
    assert r.rows("heartbeat") == [(1800.0, "missed", "", ""), (3600.0, "missed", "", "")]
    assert r.agent.calls == [] and r.channel.sent == []
    await r.close()


async def test_a_run_a_killed_daemon_left_running_is_not_run_again(tmp_path):
    cfg = config(tmp_path, [job(every="1h")])
    r = await rig(tmp_path, cfg)
    r.store.ledger_begin("plants", T0 + 3600, "r1")  # the run started, then kill -9
    await r.close()
    r = await rig(tmp_path, cfg, at=T0 + 3600 + 5)
    assert r.rows() == [(3600.0, "ran", "interrupted (the daemon stopped)", "")]
    assert r.agent.calls == []
    await r.close()


async def test_a_past_at_is_refused_naming_the_current_time(tmp_path):
    r = await rig(tmp_path, config(tmp_path))
    api = r.svc.for_route({"channel": "telegram", "chat_id": OWNER, "account": "default"})
    with pytest.raises(ValueError, match="it is now 2027-01-15 08:00 UTC"):
        await api.add("old", "x", at="2027-01-15T07:00")
    with pytest.raises(ValueError, match="exists already"):
        await api.add("a", "x", every="1h")
        await api.add("a", "x", every="2h")
    with pytest.raises(ValueError, match="config"):
        cfg_job = await rig(tmp_path / "b", config(tmp_path / "b", [job(every="1h")]))
        try:
            cfg_job.svc.remove("plants")
        finally:
            await cfg_job.close()
    await r.close()


async def test_a_heartbeat_stopped_like_a_chat_turn_is_skipped_stopped(tmp_path):
    agent = ScriptedAgent("ALERT")
    agent.gate = asyncio.Event()
    r = await rig(tmp_path, config(tmp_path, heartbeat="30m"), agent=agent)
    await r.clock.advance(1800)
    await until(lambda: agent.calls)
    runner = r.svc.scheduled.runner
    assert runner.running(main_key("main"))  # the run stage holds it: /stop reaches it
    assert await runner.stop(main_key("main")) is True
    await r.settled()
    assert r.rows("heartbeat") == [(1800.0, "skipped", "stopped", "")]
    assert r.channel.sent == []
    await r.close()


async def test_scheduled_runs_use_the_sessions_model_and_thinking(tmp_path):
    from bot.conversation.commands import controls

    cfg = config(tmp_path, [job(every="1h")], heartbeat="30m", models={"fast": "openai/fast-1"})
    r = await rig(tmp_path, cfg)
    controls._set(r.store, main_key("main"), "model", "openai/fast-1")  # as /model fast does
    controls._set(r.store, main_key("main"), "thinking", "high")  # as /think high does
    await r.advance(1800)
    await r.svc.run_now("plants")
    await r.settled()
    hb, cron = r.agent.choices
    assert (hb.model, hb.reasoning_effort) == ("openai/fast-1", "high")
    assert (cron.model, cron.reasoning_effort) == (cfg.agent.model, "")  # its own session
    await r.close()
