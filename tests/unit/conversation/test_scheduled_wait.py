"""A heartbeat or cron run waits for its send's first attempt, but not for ever: when the
platform does not answer within FIRST_ATTEMPT_WAIT the run reports the message queued and the
outbox goes on with it (the heartbeat job is free for its next tick)."""

from __future__ import annotations

import asyncio

import pytest

from bot.schedule import turns as heartbeat
from bot.agent.request import TurnResult
from bot.config import parse_config
from bot.conversation.reply import scheduled_plan
from bot.delivery.outbox import Outbox
from bot.store import Store
from tests.unit.delivery.memory import ScriptedChannel, until

ROUTE = {"channel": "telegram", "chat_id": "42", "account": "default", "thread_id": None}


@pytest.fixture
async def parts(tmp_path):
    cfg = parse_config({"agent": {"workspace": str(tmp_path / "ws")}})
    store = Store(tmp_path / "s.sqlite3")
    ch = ScriptedChannel()
    box = Outbox(store, {"telegram": ch})
    box.start(recover=False)
    sched = heartbeat.Scheduled(cfg, store, None, None, box, {"telegram": ch})  # type: ignore[arg-type]
    yield sched, ch
    if ch.gate is not None:
        ch.gate.set()
    await box.stop(grace=1)
    store.close()


async def send_alert(sched) -> str:
    result = TurnResult(text="ALERT", to_store=[], turn_id="t1")
    plan = scheduled_plan(result, heartbeat=True)
    return await sched._commit_and_send(
        "agent:main:main", result, plan, ROUTE, kind="heartbeat", own=sched.cfg
    )


async def test_a_send_that_does_not_answer_is_reported_queued_after_the_wait(parts, monkeypatch):
    sched, ch = parts
    monkeypatch.setattr(heartbeat, "FIRST_ATTEMPT_WAIT", 0.2)
    ch.gate = asyncio.Event()  # the platform holds the send
    status = await asyncio.wait_for(send_alert(sched), 5)
    assert status == "queued"
    ch.gate.set()  # the outbox still sends it once the platform answers
    await until(lambda: len(ch.sent) == 1)


async def test_twin_a_prompt_send_is_reported_delivered(parts, monkeypatch):
    sched, ch = parts
    monkeypatch.setattr(heartbeat, "FIRST_ATTEMPT_WAIT", 0.2)
    assert await asyncio.wait_for(send_alert(sched), 5) == "delivered"
    assert [m.text for m in ch.sent] == ["ALERT"]
