"""The Control UI's web turn (SPEC §16.4–16.5) through the real daemon, the fake LLM and the
fake Telegram: the stream, the transcript, one conversation across channels, idempotency by
``client_msg_id``, Stop, and a guest session's refusal with its owner twin."""

from __future__ import annotations

import asyncio
from urllib.parse import quote

from tests.e2e import eventually, telegram_section
from tests.e2e.harness import settled
from tests.e2e.ui_api_helpers import turn
from tests.e2e.ui_client import ui_config, ui_daemon
from tests.fakes.llm import streamed, text

MAIN = "agent:main:main"


def names(evs):
    return [e[0] for e in evs]


async def test_a_web_turn_streams_and_lands_in_the_transcript(tmp_path, llm):
    llm.script(
        streamed(
            "Hello ", "from the ", "model.", usage={"prompt_tokens": 7, "completion_tokens": 3}
        )
    )
    async with ui_daemon(tmp_path, llm) as ui, await ui.login() as c:
        status, evs = await turn(c, MAIN, "hi there", "m1")
        assert status == 200
        assert names(evs)[0] == "turn.started" and names(evs)[-1] == "final"
        assert evs[0][1]["client_msg_id"] == "m1" and evs[0][1]["session"] == MAIN
        deltas = "".join(d["text"] for n, d, _ in evs if n == "delta")
        assert deltas == "Hello from the model."
        final = evs[-1][1]
        assert final["stopped"] is False
        assert final["usage"]["prompt_tokens"] == 7 and final["usage"]["completion_tokens"] == 3
        assert isinstance(final["usage"]["cost_usd"], float)
        assert final["message"]["text"] == "Hello from the model."
        assert isinstance(final["message"]["id"], int)
        r = await c.get(f"/ui/api/sessions/{quote(MAIN, safe='')}/messages")
        msgs = (await r.json())["messages"]
        assert [(m["role"], m["text"]) for m in msgs] == [
            ("user", "hi there"),
            ("assistant", "Hello from the model."),
        ]
        assert msgs[0]["client_msg_id"] == "m1" and msgs[0]["channel"] == "web"
        r = await c.get("/ui/api/sessions")
        listed = {s["key"]: s for s in (await r.json())["sessions"]}
        assert listed[MAIN]["trust"] == "owner" and listed[MAIN]["messages"] == 2


async def test_the_conversation_continues_from_telegram(tmp_path, llm, tg):
    llm.script(text("Noted: blue."), text("Your colour is blue."))
    cfg = ui_config(tmp_path, llm, channels=telegram_section(tg), session={"dm_scope": "main"})
    async with ui_daemon(tmp_path, llm, cfg=cfg) as ui, await ui.login() as c:
        status, evs = await turn(c, MAIN, "my colour is blue", "c1")
        assert status == 200 and evs[-1][1]["message"]["text"] == "Noted: blue."
        tg.inject_message(42, "what is my colour?", from_id=42, username="alice")
        sent = await tg.wait_for_sent(1, timeout=15)
        assert sent[0].visible_text == "Your colour is blue."
    second = llm.requests[1]["messages"]
    assert any("my colour is blue" in str(m.get("content")) for m in second)


async def test_a_second_post_with_the_same_id_replays_without_a_model_call(tmp_path, llm):
    llm.script(text("Only once."))
    async with ui_daemon(tmp_path, llm) as ui, await ui.login() as c:
        _, first = await turn(c, MAIN, "say it", "same-id")
        status, again = await turn(c, MAIN, "say it", "same-id")
        assert status == 200
        assert names(again)[0] == "turn.started" and names(again)[-1] == "final"
        assert again[-1][1]["message"] == first[-1][1]["message"]
        # the twin: a new id is a new turn
        _, other = await turn(c, MAIN, "again please", "other-id")
        assert other[-1][1]["message"]["text"] != "Only once."
        assert len(llm.requests) == 2
        r = await c.get(f"/ui/api/sessions/{quote(MAIN, safe='')}/messages")
        texts = [m["text"] for m in (await r.json())["messages"]]
        assert texts.count("Only once.") == 1 and texts.count("say it") == 1


async def test_a_replay_while_the_turn_runs_follows_it(tmp_path, llm):
    gate = asyncio.Event()
    llm.script(streamed("Slow ", "answer.", gate=gate))
    async with ui_daemon(tmp_path, llm) as ui, await ui.login() as c:
        first = asyncio.ensure_future(turn(c, MAIN, "take your time", "r1"))
        await llm.wait_for_requests(1, timeout=15)
        second = asyncio.ensure_future(turn(c, MAIN, "take your time", "r1"))
        await asyncio.sleep(0.3)
        gate.set()
        (_, a), (_, b) = await first, await second
        assert a[-1][1]["message"]["text"] == b[-1][1]["message"]["text"] == "Slow answer."
        assert len(llm.requests) == 1


async def test_stop_ends_the_stream_stopped_and_stores_no_answer(tmp_path, llm):
    gate = asyncio.Event()
    llm.script(streamed("Partial ", "never finished", gate=gate), text("Next answer."))
    async with ui_daemon(tmp_path, llm) as ui, await ui.login() as c:
        running = asyncio.ensure_future(turn(c, MAIN, "write an essay", "s1"))
        await llm.wait_for_requests(1, timeout=15)
        await eventually(lambda: ui.daemon.conversation.runner.running(MAIN))
        r = await c.post(f"/ui/api/sessions/{quote(MAIN, safe='')}/stop")
        assert (await r.json()) == {"stopped": True}
        _, evs = await running
        final = evs[-1]
        assert final[0] == "final" and final[1]["stopped"] is True
        assert "never finished" not in final[1]["message"]["text"]
        gate.set()
        _, again = await turn(c, MAIN, "write an essay", "s1")  # a reload: still stopped
        assert again[-1][0] == "final" and again[-1][1]["stopped"] is True
        assert len(llm.requests) == 1
        r = await c.get(f"/ui/api/sessions/{quote(MAIN, safe='')}/messages")
        msgs = (await r.json())["messages"]
        assert [m["role"] for m in msgs] == ["user"]
        # nothing runs now: the twin answers false; the next message is answered
        r = await c.post(f"/ui/api/sessions/{quote(MAIN, safe='')}/stop")
        assert (await r.json()) == {"stopped": False}
        _, evs = await turn(c, MAIN, "next", "s2")
        assert evs[-1][1]["message"]["text"] == "Next answer."


async def test_a_guest_session_is_read_only_and_an_owner_one_is_not(tmp_path, llm, tg):
    llm.script(text("hello guest"), text("owner answer"))
    cfg = ui_config(
        tmp_path,
        llm,
        channels=telegram_section(tg, dm_policy="open"),
        session={"dm_scope": "per-channel-peer"},
    )
    async with ui_daemon(tmp_path, llm, cfg=cfg) as ui, await ui.login() as c:
        tg.inject_message(77, "hi", from_id=77, username="stranger")
        await tg.wait_for_sent(1, timeout=15)
        guest = "agent:main:telegram:direct:77"
        r = await c.get("/ui/api/sessions")
        trust = {s["key"]: s["trust"] for s in (await r.json())["sessions"]}
        assert trust[guest] == "guest"
        status, err = await turn(c, guest, "as the owner, in a guest chat", "g1")
        assert status == 409 and err["error"]["code"] == "conflict"
        assert len(llm.requests) == 1
        owner = "agent:main:telegram:direct:42"
        status, evs = await turn(c, owner, "mine", "o1")
        assert status == 200 and evs[-1][1]["message"]["text"] == "owner answer"


async def test_a_message_cut_by_a_restart_is_answered_once_when_the_page_sends_it_again(
    tmp_path, llm
):
    from bot.app.timeouts import Timeouts
    from tests.e2e import running
    from tests.e2e.ui_client import UiDaemon

    gate = asyncio.Event()  # the first run's model never finishes
    llm.script(streamed("never ", "sent", gate=gate), text("Answered after the restart."))
    cfg = ui_config(tmp_path, llm)
    async with running(cfg, timeouts=Timeouts(drain=0.5)) as d:
        ui = UiDaemon(d, cfg, f"http://127.0.0.1:{d.channels['http'].bound_port}")
        async with await ui.login() as c:
            cut = asyncio.ensure_future(turn(c, MAIN, "are you there?", "cut-1"))
            await llm.wait_for_requests(1, timeout=15)
            stopping = asyncio.ensure_future(d.stop())  # the page sees the daemon go
            status, evs = await cut
            await stopping
    assert status == 200 and evs[-1][0] == "error"
    assert evs[-1][1]["code"] == "shutting_down"
    gate.set()
    async with ui_daemon(tmp_path, llm, cfg=cfg) as ui, await ui.login() as c:
        await settled(ui.daemon)  # start-up does not answer it (its page has gone)
        assert len(llm.requests) == 1
        _, evs = await turn(c, MAIN, "are you there?", "cut-1")
        assert evs[-1][0] == "final"
        assert evs[-1][1]["message"]["text"] == "Answered after the restart."
        _, again = await turn(c, MAIN, "are you there?", "cut-1")  # once, not twice
        assert again[-1][1]["message"] == evs[-1][1]["message"]
        r = await c.get("/ui/api/outbox")
        assert (await r.json())["items"] == []  # nothing tried to deliver to "web"
        assert len(llm.requests) == 2


async def test_the_stream_never_shows_reasoning_or_a_silent_token(tmp_path, llm):
    llm.script(
        streamed("<think>the hidden ", "plan</think>", "Shown ", "answer"),
        streamed("NO_", "REPLY"),
    )
    async with ui_daemon(tmp_path, llm) as ui, await ui.login() as c:
        _, evs = await turn(c, MAIN, "think first", "t1")
        deltas = "".join(d["text"] for n, d, _ in evs if n == "delta")
        assert deltas == "Shown answer" and evs[-1][1]["message"]["text"] == "Shown answer"
        _, quiet = await turn(c, MAIN, "say nothing", "t2")
        assert [n for n, _, _ in quiet] == ["turn.started", "final"]
        assert quiet[-1][1]["message"]["text"] == ""
        status, err = await turn(c, "not-a-session-of-this-agent", "hi", "t3")
        assert status == 404 and err["error"]["code"] == "not_found"


async def test_a_model_failure_ends_the_stream_with_an_error(tmp_path, llm):
    from tests.fakes.llm import error

    llm.script(error(500), error(500), text("fine again"))
    async with ui_daemon(tmp_path, llm) as ui, await ui.login() as c:
        status, evs = await turn(c, MAIN, "hello?", "e1")
        assert status == 200 and evs[-1][0] == "error"
        assert evs[-1][1]["code"] == "model_error" and evs[-1][1]["message"]
        assert "final" not in [n for n, _, _ in evs]
        _, evs = await turn(c, MAIN, "and now?", "e2")  # the twin: the next one is answered
        assert evs[-1][0] == "final" and evs[-1][1]["message"]["text"] == "fine again"


async def test_a_web_turns_final_costs_what_its_calls_cost(tmp_path, llm):
    from tests.e2e.test_usage import PRICED

    llm.script(text("priced", usage={"prompt_tokens": 1000, "completion_tokens": 50}))
    cfg = ui_config(tmp_path, llm, agent={"model": PRICED})
    async with ui_daemon(tmp_path, llm, cfg=cfg) as ui, await ui.login() as c:
        _, evs = await turn(c, MAIN, "how much?", "p1")
        rows = ui.daemon.store.usage_rows(0)
    spent = evs[-1][1]["usage"]
    assert spent["prompt_tokens"] == 1000 and spent["completion_tokens"] == 50
    assert spent["cost_usd"] > 0 and spent["cost_usd"] == sum(r["cost_usd"] for r in rows)


async def test_a_closed_stream_does_not_stop_the_turn(tmp_path, llm):
    gate = asyncio.Event()
    llm.script(streamed("Written ", "anyway.", gate=gate))
    async with ui_daemon(tmp_path, llm) as ui, await ui.login() as c:
        page = await ui.login()  # a tab that is reloaded mid-answer
        gone = asyncio.ensure_future(turn(page, MAIN, "keep going", "closed-1"))
        await llm.wait_for_requests(1, timeout=15)
        await asyncio.sleep(0.2)
        gone.cancel()
        await page.close()
        gate.set()

        async def answered():
            r = await c.get(f"/ui/api/sessions/{quote(MAIN, safe='')}/messages")
            return [m["text"] for m in (await r.json())["messages"]] == [
                "keep going",
                "Written anyway.",
            ]

        for _ in range(300):
            if await answered():
                break
            await asyncio.sleep(0.05)
        assert await answered()
        _, evs = await turn(c, MAIN, "keep going", "closed-1")  # the reloaded page asks again
        assert evs[-1][1]["message"]["text"] == "Written anyway."
        assert len(llm.requests) == 1
