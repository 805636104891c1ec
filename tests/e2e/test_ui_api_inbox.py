"""The Control UI's Inbox routes (SPEC §16.4, §16.7) through the real daemon: held exec
commands decided from the API (the model gets the outcome; with no owner chat the command
waits for the Inbox), pairing approved from the API (the stranger is told and answered on
the fake Telegram), failed deliveries retried and discarded, and the event stream's replay.
Each refusal (unknown 404, decided 409, not failed 409) next to its legitimate twin."""

from __future__ import annotations

import asyncio

import pytest

from bot.agent.tools.sandbox import probe
from tests.e2e import eventually, telegram_section
from tests.e2e.harness import settled, tg_taken
from tests.e2e.ui_api_helpers import events, turn
from tests.e2e.ui_client import ui_config, ui_daemon
from tests.fakes.llm import text, tool_calls

MAIN = "agent:main:main"
OWNER, STRANGER = 42, 77


@pytest.fixture
def sandbox():
    status = probe()
    if not status.ok:
        pytest.skip(f"no working sandbox here: {status.detail}")
    return status


def tool_results(request: dict) -> list[str]:
    return [m["content"] for m in request["messages"] if m.get("role") == "tool"]


async def _held(c) -> dict:
    async def one():
        r = await c.get("/ui/api/approvals")
        items = (await r.json())["approvals"]
        return items[0] if items else None

    for _ in range(500):
        if item := await one():
            return item
        await asyncio.sleep(0.03)
    raise AssertionError("no approval was held")


async def test_an_approval_decided_in_the_inbox_reaches_the_model(tmp_path, llm, sandbox):
    # no messaging channel at all: no owner chat to ask in, so the command waits for the
    # Inbox (SPEC §16.7) instead of being refused as unavailable
    cfg = ui_config(tmp_path, llm, tools={"exec": {"security": "ask"}})
    llm.script(
        tool_calls([("exec", {"command": "echo approved-run > proof.txt"})]),
        text("finished"),
    )
    async with ui_daemon(tmp_path, llm, cfg=cfg) as ui, await ui.login() as c:
        running = asyncio.ensure_future(turn(c, MAIN, "write the proof", "a1"))
        held = await _held(c)
        assert "echo approved-run" in held["command"]
        assert held["session"] == MAIN and held["trust"] == "owner"
        assert held["expires"] - held["created"] == pytest.approx(600)
        r = await c.post("/ui/api/approvals/NOSUCH", {"decision": "approve"})
        assert r.status == 404 and (await r.json())["error"]["code"] == "not_found"
        r = await c.post(f"/ui/api/approvals/{held['code']}", {"decision": "maybe"})
        assert r.status == 400
        r = await c.post(f"/ui/api/approvals/{held['code']}", {"decision": "approve"})
        assert r.status == 200
        assert await r.json() == {"code": held["code"], "decision": "approve"}
        r = await c.post(f"/ui/api/approvals/{held['code']}", {"decision": "deny"})
        assert r.status == 409 and (await r.json())["error"]["code"] == "conflict"
        _, evs = await running
        assert evs[-1][1]["message"]["text"] == "finished"
        started = next(d for n, d, _ in evs if n == "tool.started")
        finished = next(d for n, d, _ in evs if n == "tool.finished")
        assert started["name"] == finished["name"] == "exec"
        assert finished["call_id"] == started["call_id"] and finished["ok"] is True
        assert "approved-run" in started["summary"]
        r = await c.get("/ui/api/sessions/agent%3Amain%3Amain/messages")
        tools = [m for m in (await r.json())["messages"] if m["role"] == "tool"]
        assert [t["tool"]["name"] for t in tools] == ["exec"]
    assert (cfg.agent.workspace / "proof.txt").read_text().strip() == "approved-run"
    assert not any("denied" in r.lower() for r in tool_results(llm.requests[1]))


async def test_a_denial_in_the_inbox_reaches_the_model(tmp_path, llm, sandbox):
    cfg = ui_config(tmp_path, llm, tools={"exec": {"security": "ask"}})
    llm.script(
        tool_calls([("exec", {"command": "echo denied-run > nope.txt"})]),
        text("refused"),
    )
    async with ui_daemon(tmp_path, llm, cfg=cfg) as ui, await ui.login() as c:
        stream = events(c, {"after": None, "logs": False})
        assert (await anext(stream))[0] == "hello"
        running = asyncio.ensure_future(turn(c, MAIN, "try it", "d1"))
        pending = await _named(stream, "approval.pending")
        held = await _held(c)
        assert pending[1] == held
        r = await c.post(f"/ui/api/approvals/{held['code']}", {"decision": "deny"})
        assert r.status == 200
        resolved = await _named(stream, "approval.resolved")
        assert resolved[1] == {"code": held["code"], "decision": "deny"}
        await stream.aclose()
        _, evs = await running
        assert evs[-1][1]["message"]["text"] == "refused"
        r = await c.get("/ui/api/approvals")
        assert (await r.json())["approvals"] == []
    assert not (cfg.agent.workspace / "nope.txt").exists()
    assert any("denied" in r.lower() for r in tool_results(llm.requests[1]))


async def test_a_pairing_approved_in_the_inbox_answers_the_stranger(tmp_path, llm, tg):
    llm.script(text("Nice to meet you."))
    cfg = ui_config(tmp_path, llm, channels=telegram_section(tg, dm_policy="pairing"))
    async with ui_daemon(tmp_path, llm, cfg=cfg) as ui, await ui.login() as c:
        tg.inject_message(STRANGER, "hello, may I talk to you?", from_id=STRANGER)
        await tg.wait_for(
            lambda: [m for m in tg.sent if str(m.chat_id) == str(STRANGER)], timeout=15
        )
        r = await c.get("/ui/api/pairing")
        reqs = (await r.json())["requests"]
        assert [(q["channel"], q["sender_id"]) for q in reqs] == [("telegram", str(STRANGER))]
        code = reqs[0]["code"]
        r = await c.post("/ui/api/pairing/telegram/ZZZZZZZZ", {"decision": "approve"})
        assert r.status == 404 and (await r.json())["error"]["code"] == "not_found"
        r = await c.post(f"/ui/api/pairing/telegram/{code}", {"decision": "approve"})
        assert r.status == 200
        assert await r.json() == {"channel": "telegram", "code": code, "decision": "approve"}
        to_stranger = await tg.wait_for(
            lambda: (s := [m for m in tg.sent if str(m.chat_id) == str(STRANGER)])[2:] and s,
            timeout=15,
        )
        assert "approved" in to_stranger[1].visible_text
        assert to_stranger[2].visible_text == "Nice to meet you."
        r = await c.get("/ui/api/pairing")
        assert (await r.json())["requests"] == []
    assert "hello, may I talk to you?" in str(llm.requests[0]["messages"])


async def test_a_pairing_denied_in_the_inbox_is_dropped(tmp_path, llm, tg):
    cfg = ui_config(tmp_path, llm, channels=telegram_section(tg, dm_policy="pairing"))
    async with ui_daemon(tmp_path, llm, cfg=cfg) as ui, await ui.login() as c:
        tg.inject_message(STRANGER, "let me in", from_id=STRANGER)
        await tg.wait_for(
            lambda: [m for m in tg.sent if str(m.chat_id) == str(STRANGER)], timeout=15
        )
        code = (await (await c.get("/ui/api/pairing")).json())["requests"][0]["code"]
        r = await c.post(f"/ui/api/pairing/telegram/{code}", {"decision": "deny"})
        assert r.status == 200 and (await r.json())["decision"] == "deny"
        assert (await (await c.get("/ui/api/pairing")).json())["requests"] == []
        await settled(ui.daemon, tg_taken(tg))
        assert len([m for m in tg.sent if str(m.chat_id) == str(STRANGER)]) == 1
        assert not ui.daemon.store.is_approved("telegram", str(STRANGER))
    assert llm.requests == []


async def test_failed_deliveries_retry_and_discard_and_the_events_replay(tmp_path, llm, tg):
    llm.script(text("first reply"), text("second reply"))
    cfg = ui_config(tmp_path, llm, channels=telegram_section(tg))
    async with ui_daemon(tmp_path, llm, cfg=cfg) as ui, await ui.login() as c:
        stream = events(c, {"after": None, "logs": False})
        hello = await anext(stream)
        assert hello[0] == "hello"
        start = hello[1]["seq"]
        tg.fail_chat(OWNER, status=403, times=2)  # the bot was blocked: failed for good
        tg.inject_message(OWNER, "one", from_id=OWNER)
        failed1 = await _named(stream, "delivery.failed")
        tg.inject_message(OWNER, "two", from_id=OWNER)
        failed2 = await _named(stream, "delivery.failed")
        await stream.aclose()
        r = await c.get("/ui/api/outbox?state=failed")
        items = {i["id"]: i for i in (await r.json())["items"]}
        one, two = failed1[1]["id"], failed2[1]["id"]
        assert set(items) == {one, two} and items[one]["preview"] == "first reply"
        assert items[one]["state"] == "failed" and str(items[one]["chat"]) == str(OWNER)
        r = await c.post(f"/ui/api/outbox/{one}/retry")
        assert r.status == 200 and await r.json() == {"id": one, "state": "queued"}
        sent = await tg.wait_for_sent(1, timeout=15)
        assert sent[0].visible_text == "first reply"
        await eventually(lambda: ui.daemon.store.outbox_rows([one])[0].state == "sent")
        r = await c.post(f"/ui/api/outbox/{one}/retry")  # sent now: not failed
        assert r.status == 409 and (await r.json())["error"]["code"] == "conflict"
        r = await c.post(f"/ui/api/outbox/{two}/discard")
        assert r.status == 200 and await r.json() == {"id": two, "state": "discarded"}
        r = await c.post(f"/ui/api/outbox/{two}/discard")
        assert r.status == 409
        r = await c.post("/ui/api/outbox/999999/retry")
        assert r.status == 404
        assert (await (await c.get("/ui/api/outbox?state=failed")).json())["items"] == []
        await settled(ui.daemon, tg_taken(tg))
        assert [m.visible_text for m in tg.sent] == ["first reply"]
        # a page that reconnects with the last seq it saw gets what followed, in order
        replay = events(c, {"after": start, "logs": False})
        seen = []
        async for name, data, seq in replay:
            if name == "hello":
                continue
            seen.append((name, data.get("id"), seq))
            if name == "delivery.resolved" and data["state"] == "discarded":
                break
        await replay.aclose()
        # a number from before a restart (larger than any now) replays everything kept
        after_restart = events(c, {"after": 10**9, "logs": False})
        assert (await anext(after_restart))[0] == "hello"
        first = await anext(after_restart)
        await after_restart.aclose()
    assert first[2] == 1
    got = [(n, i) for n, i, _ in seen if n.startswith("delivery.")]
    assert got == [
        ("delivery.failed", one),
        ("delivery.failed", two),
        ("delivery.resolved", one),
        ("delivery.resolved", two),
    ]
    seqs = [s for _, _, s in seen]
    assert seqs == sorted(seqs) and all(s > start for s in seqs)


async def _named(stream, name):
    async for ev in stream:
        if ev[0] == name:
            return ev
    raise AssertionError(f"the stream ended before {name}")
