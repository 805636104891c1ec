"""The reply and commit stages with Store(":memory:"): a turn's reply is planned once and
stored with its turn in one transaction."""

from __future__ import annotations

import sqlite3

import pytest

from bot.agent.turn import TurnRequest, TurnResult
from bot.config import parse_config
from bot.conversation import commit as commit_stage
from bot.conversation.commit import Commit, store_backoff
from bot.conversation.reply import (
    chat_reply,
    plan_outbound,
    scheduled_outbound,
    scheduled_plan,
)
from bot.conversation.types import ApiTurn
from bot.rules.replies import parse_reply
from bot.store import Store
from channels.base import InboundMessage, OutboundMessage

CFG = parse_config({})
MSG = InboundMessage(
    channel="telegram", chat_id="42", sender_id="42", text="hi", message_id="9", thread_id="3"
)


def result(text="Hello", **kw):
    return TurnResult(text=text, to_store=[{"role": "user", "content": "hi"}], turn_id="t1", **kw)


def req(**kw):
    return TurnRequest(session_key="k", user_text="hi", **kw)


async def test_a_reply_becomes_one_outbound_message():
    rep = await chat_reply(CFG, None, MSG, req(), result("Hello"), reply_mode="first")
    (out,) = rep.outs
    assert (out.chat_id, out.text, out.thread_id, out.reply_to_id) == ("42", "Hello", "3", "9")
    assert not out.error and rep.api_reply is None


async def test_a_silent_reply_sends_nothing_but_an_api_caller_gets_an_answer():
    rep = await chat_reply(CFG, None, MSG, req(), result("NO_REPLY"), reply_mode="off")
    assert rep.outs == ()
    rep = await chat_reply(
        CFG, None, MSG, req(), result("NO_REPLY"), reply_mode="off", api=ApiTurn()
    )
    (out,) = rep.outs
    assert out.text == "" and out.api["finish_reason"] == "stop"
    assert rep.api_reply == {"role": "assistant", "content": ""}


async def test_a_failed_turn_is_told_and_marked():
    failed = result("The model is unavailable.", error="boom", error_kind="budget")
    rep = await chat_reply(CFG, None, MSG, req(), failed, reply_mode="off")
    assert rep.outs[0].error == "budget"
    rep = await chat_reply(CFG, None, MSG, req(), result("x", error="e"), reply_mode="off")
    assert rep.outs[0].error == "model"


async def test_speech_replaces_the_plan():
    async def speak(plan):
        return parse_reply("spoken")

    rep = await chat_reply(CFG, None, MSG, req(), result("written"), reply_mode="off", speak=speak)
    assert rep.outs[0].text == "spoken"


def test_plan_outbound_and_scheduled_replies():
    assert plan_outbound(CFG, None, parse_reply("NO_REPLY"), MSG, "off", req()) == []
    hb = scheduled_plan(result("HEARTBEAT_OK"), heartbeat=True)
    assert hb.silent and hb.ack
    assert not scheduled_plan(result("HEARTBEAT_OK all fine"), heartbeat=False).silent
    route = {"channel": "telegram", "chat_id": "7", "thread_id": "1"}
    out = scheduled_outbound(CFG, None, parse_reply("alert"), route)
    assert (out.chat_id, out.thread_id, out.account, out.text) == ("7", "1", "default", "alert")


@pytest.fixture
def store():
    s = Store(":memory:")
    yield s
    s.close()


class Health:
    def __init__(self):
        self.failures = 0
        self.oks = 0

    def failed(self, e, what):
        self.failures += 1

    def ok(self):
        self.oks += 1


def inbound(store):
    return store.add_inbound("telegram", "default", "42", "m1", "k", MSG.to_json())


async def test_a_turn_its_reply_its_status_and_state_in_one_commit(store):
    iid = inbound(store)
    c = Commit(store, Health(), lambda: True)
    outs = [OutboundMessage(chat_id="42", text="Hello")]
    rows = await c.turn("k", result(), iid, outs, {"api:k": {"seen": ["a"]}})
    (row,) = store.outbox_rows(r.id for r in rows)
    assert row.payload["text"] == "Hello" and row.channel == "telegram"
    assert rows == [row]  # handed over as stored
    assert [r.id for r in store.inbound_with_status("done")] == [iid]
    assert store.get("api:k") == {"seen": ["a"]}
    assert [m["role"] for m in store.history("k", limit=10, max_chars=10_000)] == ["user"]


async def test_an_answer_and_a_stopped_turn(store):
    c = Commit(store, Health(), lambda: True)
    iid = inbound(store)
    rows = await c.answer(iid, "k", [OutboundMessage(chat_id="42", text="ok")], "a command")
    assert store.outbox_rows(r.id for r in rows) == rows and rows[0].kind == "command"
    iid2 = store.add_inbound("telegram", "default", "42", "m2", "k", MSG.to_json())
    await c.stopped(iid2, "k", req(media=[{"ref": "r"}]), "turn-x")
    msgs = store.history("k", limit=10, max_chars=10_000)
    assert msgs[-1] == {"role": "user", "content": "hi", "media": [{"ref": "r"}]}
    assert {r.id for r in store.inbound_with_status("done")} == {iid, iid2}
    prior = [{"role": "tool", "content": "r", "tool_call_id": "c"}]
    iid3 = store.add_inbound("telegram", "default", "42", "m3", "k", MSG.to_json())
    await c.stopped(iid3, "k", req(prior=prior, user_turn=False), "turn-y")
    assert store.outbox_pending() == rows  # a stop sends nothing


async def test_a_full_disk_is_retried_until_it_lands(monkeypatch):
    monkeypatch.setattr("bot.conversation.commit.asyncio.sleep", _no_sleep)
    health = Health()
    tries = []

    def write():
        tries.append(1)
        if len(tries) < 3:
            raise sqlite3.OperationalError("database or disk is full")
        return "stored"

    assert await Commit(None, health, lambda: True).write("x", write) == "stored"
    assert (len(tries), health.failures, health.oks) == (3, 2, 1)


async def test_a_full_disk_gives_up_when_stopping_and_other_errors_raise():
    def full():
        raise sqlite3.OperationalError("database or disk is full")

    with pytest.raises(sqlite3.OperationalError):
        await Commit(None, Health(), lambda: False).write("x", full)
    with pytest.raises(ZeroDivisionError):
        await Commit(None, Health(), lambda: True).write("x", lambda: 1 / 0)
    waits = store_backoff()
    cap = commit_stage.STORE_RETRY_MAX
    assert [waits.next() for _ in range(7)] == [1, 2, 4, 8, 16, cap, cap]


def test_a_scheduled_turn_with_and_without_a_reply(store):
    ids = commit_stage.scheduled(store, "hb", result(), kind="heartbeat")
    assert ids == []
    out = OutboundMessage(chat_id="42", text="alert")
    ids = commit_stage.scheduled(
        store, "hb", result(), kind="heartbeat", channel="telegram", out=out, state={"s": 1}
    )
    (row,) = store.outbox_rows(ids)
    assert row.kind == "heartbeat" and store.get("s") == 1


async def _no_sleep(_):
    return None
