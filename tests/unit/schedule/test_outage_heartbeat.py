"""Schedules during a model outage: a heartbeat due while the model is down is skipped
(ledger reason ``model down``) and never caught up; a cron job waits for the model and then
follows the catch-up rule as after the daemon's downtime."""

from __future__ import annotations

from bot.store import pending
from tests.unit.schedule.helpers import T0, config, job, rig


async def test_a_heartbeat_during_an_outage_is_skipped_model_down_then_runs_again(tmp_path):
    r = await rig(tmp_path, config(tmp_path, heartbeat="30m"))
    pending.mark_down(r.store, T0)
    await r.advance(1800)
    assert r.rows("heartbeat") == [(1800.0, "skipped", "model down", "")]
    assert r.agent.calls == []  # the model was not asked
    pending.mark_up(r.store)
    await r.advance(1800)
    rows = r.rows("heartbeat")
    assert rows[0] == (1800.0, "skipped", "model down", "")  # never caught up
    assert rows[1][:2] == (3600.0, "ran") and len(rows) == 2
    assert len(r.agent.calls) == 1
    await r.close()


async def test_a_cron_job_due_during_an_outage_catches_up_once_the_model_is_back(tmp_path):
    r = await rig(tmp_path, config(tmp_path, [job(every="1h")]))
    pending.mark_down(r.store, T0)
    await r.advance(3600)
    assert r.rows("plants") == [] and r.agent.calls == []  # waits for the model
    await r.advance(1200)
    assert r.rows("plants") == []
    pending.mark_up(r.store)
    await r.advance(5)
    assert r.rows("plants") == [(3600.0, "ran", "delivered", "catch-up")]
    assert texts_sent(r) == ["Time to water the plants"]
    await r.close()


async def test_a_cron_job_kept_past_its_catch_up_window_is_missed(tmp_path):
    r = await rig(tmp_path, config(tmp_path, [job(every="1h", catch_up="10m")]))
    pending.mark_down(r.store, T0)
    await r.advance(3600)
    await r.advance(1200)  # 20 minutes down: past the job's 10-minute catch-up
    pending.mark_up(r.store)
    await r.advance(5)
    assert r.rows("plants") == [(3600.0, "missed", "", "")]
    assert r.agent.calls == []
    await r.close()


def texts_sent(r) -> list[str]:
    return [m.text for m in r.channel.sent]
