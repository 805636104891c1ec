"""End to end: fake WhatsApp Agent Platform → daemon (our aiohttp transport) → fake LLM →
fake WhatsApp.  The fake (tests/fakes/whatsapp.py) keeps the platform's budgets, so a client
that did not pace its calls would be answered 429 and ``wa.limited`` would say so."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from bot.app.channels import SPECS, Given
from tests.e2e import all_text, config_file, eventually, make_config, running
from tests.e2e.harness import settled, store_idle
from tests.fakes.llm import delay, text
from tests.fakes.whatsapp import CREATOR, FakeWhatsApp

KEY = "test-wa-key"
ROOT = Path(__file__).resolve().parents[2]


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


# the fake serves its media on 127.0.0.1: allowed as an owner allows a private host
ALLOW_FAKE = {"web": {"allow_private_hosts": ["127.0.0.1"]}}


def stored_cursor(db_path: Path) -> object:
    db = sqlite3.connect(db_path)
    try:
        row = db.execute("SELECT value FROM kv WHERE key='cursor.whatsapp'").fetchone()
        return json.loads(row[0]) if row else None
    finally:
        db.close()


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


async def test_a_burst_of_30_replies_is_paced_none_lost_or_doubled(tmp_path, llm):
    window = 2.0  # the platform's 60 s, shortened: 12 sends per 2 s
    async with FakeWhatsApp(key=KEY, window=window) as wa:
        cfg = wa_config(
            tmp_path, llm, wa, rate_window=window, text_chunk_limit=100, sends_per_minute=12
        )
        parts = [f"part {i:02d} " + "x" * 80 for i in range(30)]
        llm.script(text("\n\n".join(parts)))
        async with running(cfg) as d:
            await eventually(lambda: wa.polls, timeout=10)
            wa.inject_text("tell me a lot")
            await wa.wait_for_sent(30, timeout=30)
            await settled(d)
        assert [s.text for s in wa.sent] == parts  # in order, none lost, none twice
        assert not wa.limited  # never over the budget: no 429 at all
        times = [s.at for s in wa.sent]
        assert all(b - a >= window * 0.9 for a, b in zip(times, times[12:], strict=False))


async def test_429_waits_retry_after_and_sends_once(tmp_path, llm, wa):
    llm.script(text("after the wait"))
    async with running(wa_config(tmp_path, llm, wa)) as d:
        await eventually(lambda: wa.polls, timeout=10)
        wa.fail_next("messages", 429, 130429, retry_after=1)
        wa.inject_text("hello")
        await wa.wait_for_sent(1)
        await settled(d)
    assert [s.text for s in wa.sent] == ["after the wait"]


async def test_409_sets_conflict_and_three_stop_polling(tmp_path, llm, wa, caplog):
    async with running(wa_config(tmp_path, llm, wa)) as d:
        ch = d.channels["whatsapp"]
        await eventually(lambda: wa.polls, timeout=10)
        wa.fail_next("updates", 409, 1752041, times=3)
        await eventually(lambda: ch.state.startswith("conflict: stopped"), timeout=15)
        polls = len(wa.polls)
        wa.inject_text("nobody hears this until restart")
        await asyncio.sleep(1.5)
        assert len(wa.polls) == polls  # stopped polling, the daemon still runs
        state = d.channel_states()["whatsapp"]
        # the owner must act: failed, with why (told on another channel when there is one)
        assert state["state"] == "failed" and "until restart" in state["error"]
    assert "another client keeps polling this API key" in caplog.text
    assert wa.sent == []


async def test_one_409_recovers_and_answers(tmp_path, llm, wa):
    llm.script(text("still here"))
    async with running(wa_config(tmp_path, llm, wa)) as d:
        await eventually(lambda: wa.polls, timeout=10)
        wa.fail_next("updates", 409, 1752041)
        await eventually(lambda: d.channel_states()["whatsapp"]["state"] == "conflict")
        wa.inject_text("are you there?")
        await wa.wait_for_sent(1)
        await settled(d)
        assert d.channel_states()["whatsapp"]["state"] == "connected"
    assert [s.text for s in wa.sent] == ["still here"]


async def test_a_refused_key_stops_polling_and_says_so(tmp_path, llm, wa, caplog):
    async with running(wa_config(tmp_path, llm, wa)) as d:
        await eventually(lambda: wa.polls, timeout=10)
        wa.fail_next("updates", 401, 190)
        await eventually(lambda: d.channel_states()["whatsapp"]["state"] == "retrying", timeout=10)
        assert "API key refused" in d.channel_states()["whatsapp"]["error"]
    assert "the platform refused the API key" in caplog.text


async def test_a_wrong_key_fails_the_start_with_a_clear_state(tmp_path, llm, wa):
    wa.key = "another-key"
    async with running(wa_config(tmp_path, llm, wa)) as d:
        await eventually(lambda: d.channel_states()["whatsapp"]["state"] == "retrying", timeout=10)
        assert "HTTP 400" in d.channel_states()["whatsapp"]["error"]


async def test_an_image_reaches_the_model_as_an_image(tmp_path, llm, wa):
    from tests.fakes.llm import image_urls
    from tests.fakes.media_samples import image_bytes

    llm.script(text("a red square"))
    cfg = make_config(
        tmp_path, llm, channels=wa_section(wa), media={"vision": "on"}, tools=ALLOW_FAKE
    )
    async with running(cfg) as d:
        await eventually(lambda: wa.polls, timeout=10)
        wa.inject_media("image", image_bytes(64, 64, fmt="PNG"), "image/png", caption="what?")
        await wa.wait_for_sent(1)
        await settled(d)
    urls = image_urls(llm.requests[0])
    assert len(urls) == 1 and urls[0].startswith("data:image/")
    assert "what?" in all_text(llm.requests[0]) and wa.downloads


async def test_a_media_url_on_a_private_host_not_allowed_is_refused(tmp_path, llm, wa, caplog):
    """The download goes through bot.net's rule: the fake's 127.0.0.1 is a loopback address
    the owner has not allowed, so the file is not fetched (the test above is the twin)."""
    from tests.fakes.media_samples import image_bytes

    caplog.set_level(logging.INFO, logger="chela")
    llm.script(text("no picture came"))
    cfg = make_config(tmp_path, llm, channels=wa_section(wa), media={"vision": "on"})
    async with running(cfg) as d:
        await eventually(lambda: wa.polls, timeout=10)
        wa.inject_media("image", image_bytes(8, 8, fmt="PNG"), "image/png", caption="see?")
        await wa.wait_for_sent(1)
        await settled(d)
    assert [s.text for s in wa.sent] == ["no picture came"] and wa.downloads == []
    assert "blocked address" in caplog.text and "allow_private_hosts" in caplog.text


async def test_oversized_media_is_logged_not_fetched_and_still_answered(tmp_path, llm, wa, caplog):
    caplog.set_level(logging.INFO, logger="chela")
    llm.script(text("got your note"))
    cfg = make_config(tmp_path, llm, channels=wa_section(wa), media={"max_download_mb": 1})
    async with running(cfg) as d:
        await eventually(lambda: wa.polls, timeout=10)
        big = b"%PDF-1.4\n" + b"0" * (2 * 1024 * 1024)
        wa.inject_media("document", big, "application/pdf", filename="big.pdf", caption="see")
        await wa.wait_for_sent(1)
        await settled(d)
    assert [s.text for s in wa.sent] == ["got your note"] and not wa.downloads
    assert "file big.pdf not fetched" in caplog.text and "over 1048576" in caplog.text


async def test_a_media_marker_is_uploaded_and_sent(tmp_path, llm, wa):
    from tests.fakes.media_samples import image_bytes

    cfg = wa_config(tmp_path, llm, wa)
    pic = tmp_path / "ws" / "pic.png"
    pic.parent.mkdir(parents=True, exist_ok=True)
    pic.write_bytes(image_bytes(32, 32, fmt="PNG"))
    (tmp_path / "ws" / "notes.md").write_text("# notes\n")
    (tmp_path / "ws" / "anim.gif").write_bytes(b"GIF89a" + b"\0" * 20)
    llm.script(
        text(
            f"Here it is [IMAGE:{pic}] [DOCUMENT:{tmp_path / 'ws' / 'notes.md'}] "
            f"[IMAGE:{tmp_path / 'ws' / 'anim.gif'}]"
        )
    )
    async with running(cfg) as d:
        await eventually(lambda: wa.polls, timeout=10)
        wa.inject_text("send me the picture")
        await wa.wait_for_sent(4)
        await settled(d)
    kinds = [s.payload["type"] for s in wa.sent]
    assert kinds == ["text", "image", "document", "text"]
    assert wa.sent[0].text == "Here it is"
    assert [u.mime for u in wa.uploads] == ["image/png", "text/plain"]
    assert wa.uploads[0].data == pic.read_bytes()
    assert "anim.gif cannot be sent on WhatsApp" in wa.sent[3].text


async def test_an_offset_file_of_an_older_chela_is_taken_over_once(tmp_path, llm, wa):
    """An upgrade: the offset an older Chela kept in <state_dir>/whatsapp/default.offset is
    read once into the state database and the file removed: what it had taken is not
    answered again, what came after is (not skipped as a first start's backlog)."""
    wa.inject_text("taken before the upgrade")
    cfg = wa_config(tmp_path, llm, wa)
    old = cfg.agent.state_dir / "whatsapp" / "default.offset"
    old.parent.mkdir(parents=True)
    old.write_text("1")
    wa.inject_text("sent during the upgrade")
    llm.script(text("answered after the upgrade"))
    async with running(cfg) as d:
        await wa.wait_for_sent(1)
        await settled(d)
    assert [s.text for s in wa.sent] == ["answered after the upgrade"]
    assert "sent during the upgrade" in all_text(llm.requests[0])
    assert "taken before the upgrade" not in all_text(llm.requests[0])
    assert not old.exists() and stored_cursor(cfg.db_path) == 2


async def test_kill_9_mid_turn_is_answered_once_after_restart(tmp_path, llm, wa):
    cfg_path = config_file(
        tmp_path / "c.toml",
        llm,
        workspace=tmp_path / "ws",
        state_dir=tmp_path / "state",
        channels=wa_section(wa),
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "bot", "run", "--config", str(cfg_path)]
    llm.script(delay(8, text("too late")))  # longer than the kill, short enough for teardown
    first = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        await eventually(lambda: len(wa.polls) >= 2, timeout=30)  # past the first start
        wa.inject_text("are you there?")
        await llm.wait_for_requests(1, timeout=30)  # the turn is in progress
        first.send_signal(signal.SIGKILL)
        first.wait(10)
    finally:
        if first.poll() is None:
            first.kill()
    assert wa.sent == []
    killed_at = len(wa.polls)
    llm.script(text("yes, here"))
    second = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        await wa.wait_for_sent(1, timeout=30)
        db_path = make_config(tmp_path, llm).db_path
        await eventually(lambda: store_idle(db_path), timeout=30)
        await asyncio.sleep(1.0)  # a second answer would have come by now
    finally:
        second.send_signal(signal.SIGTERM)
        rc = second.wait(20)
    assert [s.text for s in wa.sent] == ["yes, here"]
    assert rc == 0
    # the offset was committed with the row before the kill: the restart polled on from
    # past the message (not re-delivered) and answered it from the store (not skipped)
    db_path = make_config(tmp_path, llm).db_path
    newest = wa.world.updates[-1][0]
    assert stored_cursor(db_path) == newest
    after = [offset for _, offset, _ in wa.polls[killed_at:]]
    assert after and all(offset == newest for offset in after)
    assert not (tmp_path / "state" / "whatsapp" / "default.offset").exists()


async def test_doctor_checks_the_key_and_names_the_agent(tmp_path, llm, wa, monkeypatch):
    from bot.cli.doctor import doctor
    from tests.fakes.whatsapp import AGENT_ID

    cfg = wa_config(tmp_path, llm, wa)
    wa.inject_text("an old message")
    by = {f.subject: f for f in await doctor(cfg)}
    assert by["channel whatsapp"].level == "OK"
    assert f"agent {AGENT_ID}" in by["channel whatsapp"].detail
    assert wa.statuses == [] and wa.sent == []  # it read nothing away, answered nothing
    monkeypatch.setenv("TEST_WA_KEY", "a-revoked-key")  # twin: a key the platform refuses
    by = {f.subject: f for f in await doctor(cfg)}
    assert by["channel whatsapp"].level == "FAIL" and "TEST_WA_KEY" in by["channel whatsapp"].fix


async def test_malformed_and_failed_polls_back_off_and_nothing_is_lost(tmp_path, llm, wa, caplog):
    llm.script(text("made it"))
    async with running(wa_config(tmp_path, llm, wa)) as d:
        await eventually(lambda: wa.polls, timeout=10)
        wa.fail_next("updates", 200)  # broken JSON
        wa.fail_next("updates", 503, 131016)
        wa.fail_next("updates", 500, 2)
        wa.inject_text("through the storm")
        await wa.wait_for_sent(1, timeout=20)
        await settled(d)
        assert d.channel_states()["whatsapp"]["state"] == "connected"
    assert [s.text for s in wa.sent] == ["made it"]
    assert "poll failed" in caplog.text


async def test_the_api_key_never_reaches_a_log_line_or_a_state(tmp_path, llm, wa, caplog):
    """Failed polls, a refused send and finally a refused key, all logged at DEBUG: the key
    is in none of the lines, nor in the channel's state; the settings' repr hides it too."""
    caplog.set_level(logging.DEBUG)
    llm.script(text("one answer"))
    async with running(wa_config(tmp_path, llm, wa)) as d:
        await eventually(lambda: wa.polls, timeout=10)
        wa.fail_next("updates", 500, 2)
        wa.fail_next("messages", 503, 131016)
        wa.inject_text("hello")
        await wa.wait_for_sent(1)
        wa.fail_next("updates", 401, 190)
        await eventually(lambda: d.channel_states()["whatsapp"]["state"] == "retrying", timeout=10)
        states = repr(d.channel_states())
        await settled(d)
    assert "poll failed" in caplog.text and "API key" in caplog.text  # the failures were logged
    assert KEY not in caplog.text and KEY not in states
    spec = SPECS["whatsapp"]
    cfg = wa_config(tmp_path, llm, wa)
    settings = spec.make_settings(Given(cfg, spec.section_of(cfg), {"api_key_env": KEY}, tmp_path))
    assert settings.api_key == KEY and KEY not in repr(settings)
