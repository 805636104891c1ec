"""End to end: fake WhatsApp Agent Platform → daemon (our aiohttp transport) → fake LLM →
fake WhatsApp.  The fake (tests/fakes/whatsapp.py) keeps the platform's budgets, so a client
that did not pace its calls would be answered 429 and ``wa.limited`` would say so."""

from __future__ import annotations

import logging
import os

import pytest

from tests.e2e import all_text, eventually, make_config, running
from tests.e2e.harness import settled
from tests.fakes.llm import text
from tests.fakes.whatsapp import CREATOR, FakeWhatsApp

KEY = "test-wa-key"


@pytest.fixture
async def wa():
    async with FakeWhatsApp(key=KEY) as f:
        yield f


def wa_section(fake: FakeWhatsApp, **kw) -> dict:
    os.environ["TEST_WA_KEY"] = KEY
    return {
        "whatsapp": {
            "enabled": True,
            "api_key_env": "TEST_WA_KEY",
            "api_base": fake.api_base,
            "poll_timeout": 1,
            **kw,
        }
    }


def wa_config(tmp_path, llm, wa, **kw):
    return make_config(tmp_path, llm, channels=wa_section(wa, **kw))


async def test_dm_is_answered_formatted_and_marked_read(tmp_path, llm, wa):
    llm.script(text("Hello **Alex**, this is _fine_ and ~~gone~~ with `code`."))
    async with running(wa_config(tmp_path, llm, wa)) as d:
        await eventually(lambda: wa.polls, timeout=10)
        wamid = wa.inject_text("hi there")
        sent = await wa.wait_for_sent(1)
        await settled(d)
    assert sent[0].payload["to"] == CREATOR
    assert sent[0].text == "Hello *Alex*, this is _fine_ and ~gone~ with `code`."
    assert "hi there" in llm.requests[0]["messages"][-2]["content"]
    # the creator is the owner: no pairing code, the owner's session
    assert len(wa.sent) == 1 and not wa.limited
    read = [b for _, b in wa.statuses if b["message_id"] == wamid]
    assert read and read[0]["status"] == "read"
    assert any("typing_indicator" in b for _, b in wa.statuses)  # typing while the turn ran


async def test_backlog_is_skipped_at_first_start_then_the_cursor_is_kept(tmp_path, llm, wa):
    old = [wa.inject_text(f"old {i}") for i in range(3)]
    cfg = wa_config(tmp_path, llm, wa)
    async with running(cfg) as d:
        await eventually(lambda: len(wa.polls) >= 2, timeout=10)
        llm.script(text("new answer"))
        wa.inject_text("new one")
        await wa.wait_for_sent(1)
        await settled(d)
    assert [s.text for s in wa.sent] == ["new answer"]
    assert len(llm.requests) == 1
    assert not any("old 0" in all_text(r) or "old 2" in all_text(r) for r in llm.requests)
    # only the newest of the backlog is marked read, once
    assert [b["message_id"] for _, b in wa.statuses if b["message_id"] in old] == [old[-1]]
    # a restart reads on from the stored cursor: nothing answered again, the new one answered
    llm.script(text("after restart"))
    async with running(cfg) as d:
        wa.inject_text("while away?")
        await wa.wait_for_sent(2)
        await settled(d)
    assert [s.text for s in wa.sent] == ["new answer", "after restart"]


async def test_linked_device_transport_is_refused_naming_the_key(tmp_path, llm, wa):
    from bot.config import ConfigError

    with pytest.raises((ConfigError, ValueError)) as err:
        wa_config(tmp_path, llm, wa, transport="linked_device")
    assert "transport" in str(err.value) and "not available yet" in str(err.value)


async def test_bad_input_is_logged_and_skipped_nothing_lost(tmp_path, llm, wa, caplog):
    caplog.set_level(logging.INFO, logger="chela")
    async with running(wa_config(tmp_path, llm, wa)) as d:
        await eventually(lambda: wa.polls, timeout=10)
        llm.script(text("answer to the good one"))
        wa.inject({"type": "location", "location": {"latitude": 1}})
        wa.inject({"type": "text", "text": "not an object"})
        wa.inject({"type": "text", "text": {"body": "from an agent"}, "from": "agent:1"})
        wa.inject({"type": "reaction", "reaction": {"message_id": "wamid.x", "emoji": "x"}})
        wa.inject_text("the good one")
        await wa.wait_for_sent(1)
        await settled(d)
    assert [s.text for s in wa.sent] == ["answer to the good one"]
    assert "skipping a 'location' message" in caplog.text
