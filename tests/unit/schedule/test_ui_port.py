"""The Control UI's side of the scheduler (SPEC §16.4, §16.5): jobs() in the shape of
GET /ui/api/schedule, and a schedule.run notice when a run starts and when it ends."""

from __future__ import annotations

import pytest

from bot.reports.notices import Notices
from tests.unit.delivery.memory import until
from tests.unit.schedule.helpers import T0, config, job, rig

pytestmark = pytest.mark.timeout(30)

KEYS = {
    "name",
    "kind",
    "schedule",
    "target",
    "paused",
    "next_run",
    "last_run",
    "last_result",
    "source",
    "spec",
    "prompt",
}


async def test_jobs_lists_the_heartbeat_and_each_job_in_the_ui_shape(tmp_path):
    r = await rig(tmp_path, config(tmp_path, [job(every="1h")]))
    jobs = r.svc.jobs()
    assert [j["name"] for j in jobs] == ["heartbeat", "plants"]  # the heartbeat, even off
    assert all(set(j) == KEYS for j in jobs)
    plants = jobs[1]
    assert plants["kind"] == "cron" and plants["schedule"] == "every 1h"
    assert plants["next_run"] == T0 + 3600 and plants["last_result"] is None
    await r.svc.run_now("plants")
    await r.settled()
    r.svc.pause("plants")
    plants = r.svc.jobs()[1]
    assert plants["paused"] is True and plants["next_run"] is None
    assert plants["last_result"] == {"status": "delivered", "detail": "delivered"}
    await r.close()


async def test_a_run_publishes_schedule_run_notices(tmp_path):
    r = await rig(tmp_path, config(tmp_path, [job(every="1h")]))
    r.svc.notices = Notices()
    run_id = await r.svc.run_now("plants")
    await until(lambda: len(r.svc.notices.since(None)) == 2)
    got = [(n.name, n.data) for n in r.svc.notices.since(None)]
    assert got == [
        ("schedule.run", {"name": "plants", "run_id": run_id, "status": "running"}),
        ("schedule.run", {"name": "plants", "run_id": run_id, "status": "ran"}),
    ]
    await r.close()
