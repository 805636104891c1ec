"""Per-session lanes (SPEC §4.5): one job at a time per session in arrival order, sessions in
parallel up to the limit; a job's failure or cancel does not stop its lane; drain stops taking
jobs and bounds the wait for the running ones."""

from __future__ import annotations

import asyncio

import pytest

from bot.conversation.lanes import SessionLanes


def job(log: list, name: str, gate: asyncio.Event | None = None, result=None):
    async def run():
        log.append(f"start {name}")
        if gate is not None:
            await gate.wait()
        log.append(f"end {name}")
        return result if result is not None else name

    return run


async def test_one_session_runs_in_order_two_sessions_in_parallel():
    lanes, log, gate = SessionLanes(), [], asyncio.Event()
    a1 = lanes.submit("a", job(log, "a1", gate))
    a2 = lanes.submit("a", job(log, "a2"))
    b1 = lanes.submit("b", job(log, "b1"))
    assert await b1 == "b1"  # b does not wait for a
    assert log == ["start a1", "start b1", "end b1"] and lanes.busy("a")
    gate.set()
    assert (await a1, await a2) == ("a1", "a2")
    assert log[-3:] == ["end a1", "start a2", "end a2"]
    await asyncio.sleep(0)
    assert not lanes.busy("a") and not lanes.busy("b")


async def test_the_limit_bounds_sessions_running_at_once():
    lanes, log, gate = SessionLanes(max_concurrent=1), [], asyncio.Event()
    first = lanes.submit("a", job(log, "a", gate))
    second = lanes.submit("b", job(log, "b"))
    await asyncio.sleep(0.01)
    assert log == ["start a"]  # b waits behind the limit
    gate.set()
    await asyncio.gather(first, second)
    assert log == ["start a", "end a", "start b", "end b"]


async def test_a_failing_job_fails_its_future_and_the_lane_goes_on():
    lanes = SessionLanes()

    async def broken():
        raise ValueError("no")

    bad = lanes.submit("a", broken)
    good = lanes.submit("a", job([], "next"))
    with pytest.raises(ValueError):
        await bad
    assert await good == "next"


async def test_cancel_stops_the_running_job_only():
    lanes, log, gate = SessionLanes(), [], asyncio.Event()
    assert lanes.cancel("a") is False  # nothing runs
    running = lanes.submit("a", job(log, "long", gate))
    queued = lanes.submit("a", job(log, "queued"))
    await asyncio.sleep(0.01)
    assert lanes.cancel("a") is True
    assert await queued == "queued"
    assert running.cancelled() and "end long" not in log


async def test_a_future_cancelled_while_queued_is_skipped():
    lanes, log, gate = SessionLanes(), [], asyncio.Event()
    first = lanes.submit("a", job(log, "first", gate))
    dropped = lanes.submit("a", job(log, "dropped"))
    dropped.cancel()
    gate.set()
    await first
    await asyncio.sleep(0.01)
    assert "start dropped" not in log


async def test_drain_waits_for_running_jobs_and_drops_queued_ones():
    lanes, log, gate = SessionLanes(), [], asyncio.Event()
    running = lanes.submit("a", job(log, "running", gate))
    queued = lanes.submit("a", job(log, "queued"))
    await asyncio.sleep(0.01)
    draining = asyncio.ensure_future(lanes.drain(timeout=5))
    await asyncio.sleep(0.01)
    gate.set()
    assert await draining is True
    assert await running == "running" and queued.cancelled()
    late = lanes.submit("a", job(log, "late"))
    with pytest.raises(RuntimeError, match="shutting down"):
        await late
    assert await SessionLanes().drain(timeout=1) is True  # nothing to wait for


async def test_drain_gives_up_on_a_stuck_job_after_its_timeout():
    lanes, log = SessionLanes(), []
    stuck = lanes.submit("a", job(log, "stuck", asyncio.Event()))
    await asyncio.sleep(0.01)
    assert await lanes.drain(timeout=0.05) is False
    assert stuck.cancelled() or stuck.done()
