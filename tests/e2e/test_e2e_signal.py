"""End to end: fake signal-cli (JSON-RPC + SSE) → daemon (our aiohttp Signal client) → fake LLM (real litellm)
→ fake signal-cli."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.e2e import (
    LONG_ANSWER,
    all_text,
    assert_long_answer_delivered,
    eventually,
    make_config,
    running,
    system_prompt,
)
from tests.e2e.harness import settled, signal_taken
from tests.fakes.llm import text
from tests.fakes.signal import FakeSignalCli

BOT = "+15550000000"
ALICE = "+15550001111"
BOB = "+15550002222"
GROUP = "R3JvdXBEZXZUZWFtMTIzNA=="
OTHER_GROUP = "T3RoZXJHcm91cDk5OTk5OQ=="


@pytest.fixture
async def sig():
    f = FakeSignalCli(account=BOT, keepalive=0.3)
    await f.start()
    yield f
    await f.stop()


@pytest.fixture
def cfg(tmp_path, llm, sig):
    section = {
        "enabled": True,
        "account": BOT,
        "http_url": sig.url,
        "allow_from": [ALICE],
        "groups": [GROUP],
    }
    return make_config(tmp_path, llm, channels={"signal": section})


async def test_dm_gets_reply(cfg, llm, sig):
    llm.script(text("Hello **Alice**!"))
    async with running(cfg) as d:
        await sig.wait_for_clients(1)
        sig.inject_message(ALICE, "hi there", source_name="Alice")
        sent = await sig.wait_for_sent(1, timeout=15)
        await settled(d, signal_taken(d, sig))
    assert len(sig.sent) == 1
    assert sent[0]["recipient"] == [ALICE] and sent[0]["account"] == BOT
    assert sent[0]["message"] == "Hello Alice!"  # plain text, no Markdown asterisks
    assert "quoteTimestamp" not in sent[0]
    assert len(llm.requests) == 1 and "hi there" in all_text(llm.requests[0])
    assert "## Group Chat Context" not in system_prompt(llm.requests[0])


async def test_group_mention_gating_and_pending_history(cfg, llm, sig):
    async with running(cfg) as d:
        await sig.wait_for_clients(1)
        sig.inject_message(
            BOB,
            "the deploy broke at noon",
            group_id=GROUP,
            group_name="Dev Team",
            source_name="Bob",
        )
        await settled(d, signal_taken(d, sig))
        assert sig.sent == [] and llm.requests == []
        # a group that is not allowlisted: ignored even with a mention
        sig.inject_message(
            BOB, "\ufffc hello", group_id=OTHER_GROUP, group_name="Other", mentions=[BOT]
        )
        await settled(d, signal_taken(d, sig))
        assert sig.sent == [] and llm.requests == []
        llm.script(text("Looking into it."))
        sig.inject_message(
            BOB,
            "\ufffc what happened?",
            group_id=GROUP,
            group_name="Dev Team",
            mentions=[BOT],
            source_name="Bob",
        )
        sent = await sig.wait_for_sent(1, timeout=15)
        await settled(d, signal_taken(d, sig))
    assert len(sig.sent) == 1 and len(llm.requests) == 1
    assert sent[0]["groupId"] == GROUP and "recipient" not in sent[0]
    assert sent[0]["message"] == "Looking into it."
    req = llm.requests[0]
    assert "## Group Chat Context" in system_prompt(req) and "Dev Team" in system_prompt(req)
    body = all_text(req)
    assert "the deploy broke at noon" in body and "what happened?" in body


async def test_no_reply_is_silent(cfg, llm, sig):
    llm.script(text("NO_REPLY"))
    async with running(cfg) as d:
        await sig.wait_for_clients(1)
        sig.inject_message(ALICE, "ok thanks")
        await llm.wait_for_requests(1, timeout=15)
        await settled(d, signal_taken(d, sig))
    assert sig.sent == [] and sig.calls("send") == []


async def test_reply_tag_quotes_trigger(cfg, llm, sig):
    llm.script(text("[[reply_to_current]] Sure thing"))
    async with running(cfg):
        await sig.wait_for_clients(1)
        env = sig.inject_message(ALICE, "can you?")
        sent = await sig.wait_for_sent(1, timeout=15)
    assert sent[0]["message"] == "Sure thing"
    assert sent[0]["quoteTimestamp"] == env["dataMessage"]["timestamp"]
    assert sent[0]["quoteAuthor"] == ALICE


async def test_long_answer_is_chunked_within_limit(cfg, llm, sig):
    assert 5000 < len(LONG_ANSWER) < 9000
    llm.script(text(LONG_ANSWER))
    async with running(cfg) as d:
        await sig.wait_for_clients(1)
        sig.inject_message(ALICE, "long please")
        await sig.wait_for_sent(2, timeout=15)
        await settled(d, signal_taken(d, sig))
    chunks = [s["message"] for s in sig.sent]
    assert_long_answer_delivered(chunks, 4000)
    assert all(s["recipient"] == [ALICE] for s in sig.sent)


async def test_media_markers_link_and_attachment(cfg, llm, sig):
    llm.script(text("Here you go\n[IMAGE:https://example.com/a.png]\n[DOCUMENT:report.pdf]"))
    async with running(cfg) as d:
        (cfg.agent.workspace / "report.pdf").write_bytes(b"%PDF-1.4 fake")
        await sig.wait_for_clients(1)
        sig.inject_message(ALICE, "send files")
        await sig.wait_for_sent(1, timeout=15)
        await settled(d, signal_taken(d, sig))
    assert len(sig.sent) == 1
    s = sig.sent[0]
    assert s["message"].startswith("Here you go")
    assert "https://example.com/a.png" in s["message"]
    assert len(s["attachments"]) == 1
    att = Path(s["attachments"][0])
    assert att.is_absolute() and att.name == "report.pdf" and att.read_bytes() == b"%PDF-1.4 fake"
    assert att.resolve() == (cfg.agent.workspace / "report.pdf").resolve()


async def test_unknown_dm_sender_gets_pairing_code(cfg, llm, sig):
    async with running(cfg) as d:
        await sig.wait_for_clients(1)
        sig.inject_message("+15559990000", "let me in", source_name="Eve")
        sent = await sig.wait_for_sent(2, timeout=15)
        await settled(d, signal_taken(d, sig))
    assert len(sig.sent) == 2 and sent[0]["recipient"] == ["+15559990000"]
    assert "Pairing code" in sent[0]["message"] and "+15559990000" in sent[0]["message"]
    # the owner is told in their direct chat (SPEC §17.4), with the same code
    code = sent[0]["message"].split("Pairing code: ")[1][:8]
    assert sent[1]["recipient"] == [ALICE] and f"/pair approve {code}" in sent[1]["message"]
    assert llm.requests == []


async def test_event_stream_drop_and_replay_answers_each_message_once(cfg, llm, sig):
    loop = asyncio.get_running_loop()

    async def drop_and_wait_reconnect() -> float:
        sig.drop_streams()
        t0 = loop.time()
        await sig.wait_for_clients(1, timeout=10)
        return loop.time() - t0

    llm.script(text("answer one"), text("answer two"), text("answer three"))
    async with running(cfg) as d:
        await sig.wait_for_clients(1)
        sig.inject_message(ALICE, "message one")
        await sig.wait_for_sent(1, timeout=15)
        first_connects = len(sig.events_requests)

        # the stream drops; a message arrives while nobody listens; the client comes back
        sig.drop_streams()
        await asyncio.sleep(0.05)
        sig.inject_message(ALICE, "message two")
        await sig.wait_for_clients(1, timeout=10)
        await sig.wait_for_sent(2, timeout=15)
        assert len(sig.events_requests) == first_connects + 1
        assert sig.events_requests[-1]["last_event_id"] is not None  # resumed, not started over

        # signal-cli restarts: the reconnecting client gets every kept event again
        sig.restart_event_ids()
        waits = [await drop_and_wait_reconnect()]
        # healthy means the new stream delivered bytes (the replay, a keep-alive)
        await eventually(lambda: d.channels["signal"]._stream_got_data)
        # a stream that was healthy before it broke is retried promptly every time (no growing backoff)
        waits.append(await drop_and_wait_reconnect())
        await settled(d, signal_taken(d, sig))  # the replayed events were all seen again
        sig.inject_message(ALICE, "message three")
        await sig.wait_for_sent(3, timeout=15)
        await settled(d, signal_taken(d, sig))
    assert [s["message"] for s in sig.sent] == ["answer one", "answer two", "answer three"]
    assert len(llm.requests) == 3
    last_user = [
        [m for m in r["messages"] if m["role"] == "user"][-1]["content"] for r in llm.requests
    ]
    assert (
        "message one" in last_user[0]
        and "message two" in last_user[1]
        and "message three" in last_user[2]
    )
    assert all(w < 1.8 for w in waits), waits


async def test_quote_of_bot_message_in_group_counts_as_mention(cfg, llm, sig):
    llm.script(text("First answer."), text("Follow-up answer."))
    async with running(cfg) as d:
        await sig.wait_for_clients(1)
        sig.inject_message(
            BOB, "\ufffc question", group_id=GROUP, group_name="Dev Team", mentions=[BOT]
        )
        sent = await sig.wait_for_sent(1, timeout=15)
        sig.inject_message(
            BOB,
            "and then?",
            group_id=GROUP,
            group_name="Dev Team",
            quote={"id": sent[0]["timestamp"], "author": BOT, "text": "First answer."},
        )
        await sig.wait_for_sent(2, timeout=15)
        # quoting someone else is not addressing the bot
        env = sig.inject_message(ALICE, "unrelated", group_id=GROUP, group_name="Dev Team")
        sig.inject_message(
            BOB,
            "agreed",
            group_id=GROUP,
            group_name="Dev Team",
            quote={"id": env["timestamp"], "author": ALICE, "text": "unrelated"},
        )
        await settled(d, signal_taken(d, sig))
    assert [s["message"] for s in sig.sent] == ["First answer.", "Follow-up answer."]
    assert len(llm.requests) == 2
