"""One scheduler: a process that did not start the scheduler (``chela chat`` without a
daemon, a CLI) stores the jobs it adds and never runs them; the running daemon follows the
stored jobs (added, changed, removed) and runs them.  A job made where no chat can be
reached later is refused unless the owner's last direct chat is known, and the tool's
answer names where it goes."""

from __future__ import annotations

import asyncio

import pytest

from bot.conversation.owner_route import KEY
from bot.schedule import ScheduleService
from bot.schedule.sync import follow, sync_once
from bot.store import Store
from tests.unit.delivery.memory import until
from tests.unit.schedule.helpers import OWNER, config, rig

TERMINAL = {"channel": "terminal", "chat_id": "local", "account": "default"}
OWNER_ROUTE = {
    "channel": "telegram",
    "chat_id": OWNER,
    "account": "default",
    "sender_id": OWNER,
    "trust": "owner",
    "at": 1.0,
}


def other_process(r, tmp_path) -> ScheduleService:
    """A second process on the same state database that never starts the scheduler."""
    store = Store(tmp_path / "state.sqlite3")
    return ScheduleService(r.cfg, store, r.svc.scheduled, clock=r.clock)


async def test_a_job_stored_by_another_process_is_followed_and_runs_here(tmp_path):
    r = await rig(tmp_path, config(tmp_path))
    r.store.put(KEY, OWNER_ROUTE)
    chat = other_process(r, tmp_path)
    answer = await chat.for_route(TERMINAL).add("tea", "Tea is ready.", **{"in": "30s"})
    assert answer.endswith("it will be sent to your Telegram chat; the daemon is not running "
                           "now: it runs when `chela run` is started (a run missed by less "
                           "than its catch_up is made up once).")  # fmt: skip
    assert chat._loops == {}  # the process that added it does not run it
    assert r.svc.registry.get("tea") is None  # not seen yet
    task = asyncio.ensure_future(follow(r.svc, every=0.05))
    try:
        await until(lambda: r.svc.registry.get("tea") is not None, "followed")
        await r.advance(30)
        await until(lambda: r.channel.sent, "delivered")
    finally:
        task.cancel()
    assert [m.chat_id for m in r.channel.sent] == [OWNER]  # the owner's last direct chat
    assert [row[1] for row in r.rows("tea")] == ["ran"]
    await r.close()


async def test_removed_or_changed_elsewhere_is_followed(tmp_path):
    r = await rig(tmp_path, config(tmp_path))
    api = r.svc.for_route({"channel": "telegram", "chat_id": OWNER, "account": "default"})
    await api.add("water", "Water the plants.", every="1h")
    await api.add("tea", "Tea.", every="2h")
    assert sync_once(r.svc) == ([], [])  # what this process added is already followed
    r.store.remove_cron_job("tea")  # as another process's `/cron remove` does
    assert sync_once(r.svc) == ([], ["tea"])
    assert r.svc.registry.get("tea") is None
    await r.advance(3600)
    await r.advance(3600)
    assert r.rows("tea") == []  # never run after it was removed elsewhere
    assert [row[1] for row in r.rows("water")] == ["ran", "ran"]
    await r.close()


async def test_paused_elsewhere_is_skipped_here(tmp_path):
    r = await rig(tmp_path, config(tmp_path))
    api = r.svc.for_route({"channel": "telegram", "chat_id": OWNER, "account": "default"})
    await api.add("water", "Water the plants.", every="1h")
    other_process(r, tmp_path).pause("water")
    await r.advance(3600)
    assert [(row[1], row[2]) for row in r.rows("water")] == [("skipped", "paused")]
    await r.close()


async def test_from_the_terminal_with_no_owner_chat_known_it_is_refused(tmp_path):
    r = await rig(tmp_path, config(tmp_path))
    api = r.svc.for_route(TERMINAL)
    with pytest.raises(ValueError, match="this chat cannot be reached later") as e:
        await api.add("tea", "Tea is ready.", **{"in": "2m"})
    assert "not scheduled" in str(e.value)
    assert r.store.cron_jobs() == []  # nothing stored: nothing to promise
    # twin: once the owner has written on Telegram, the job goes there and says so
    r.store.put(KEY, OWNER_ROUTE)
    answer = await api.add("tea", "Tea is ready.", **{"in": "2m"})
    assert answer == (
        "Scheduled job 'tea'; next run 2027-01-15 08:02 UTC; it will be sent to your Telegram chat."
    )
    await r.advance(120)
    await until(lambda: r.channel.sent, "delivered")
    await r.close()


async def test_run_now_is_refused_where_the_scheduler_does_not_run(tmp_path):
    r = await rig(tmp_path, config(tmp_path))
    api = r.svc.for_route({"channel": "telegram", "chat_id": OWNER, "account": "default"})
    await api.add("water", "Water the plants.", every="1h")
    chat = other_process(r, tmp_path)
    chat.registry.load(r.clock.now())
    with pytest.raises(ValueError, match="chela run"):
        await chat.for_route(TERMINAL).run_now("water")
    assert r.rows("water") == []
    await r.close()


async def test_without_a_chat_of_origin_a_job_with_nowhere_to_go_is_stored_with_a_warning(
    tmp_path,
):
    r = await rig(tmp_path, config(tmp_path))
    answer = await r.svc.for_route({}).add("tea", "Tea is ready.", every="1h")  # the UI
    assert "it cannot be delivered yet: no direct chat with the owner" in answer
    assert [j["name"] for j in r.store.cron_jobs()] == ["tea"]
    await r.close()
