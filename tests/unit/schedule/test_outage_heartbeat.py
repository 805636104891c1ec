"""A heartbeat due while the model is down is skipped (ledger reason ``model down``) and
never caught up; the twin: once the model answers again, the next one runs."""

from __future__ import annotations

from bot.store import pending
from tests.unit.schedule.helpers import T0, config, rig


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
