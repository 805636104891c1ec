"""End to end: fake Slack (Web API + Socket Mode / signed HTTP events) → daemon (real slack-bolt/slack-sdk)
→ fake LLM (real litellm) → fake Slack."""

from __future__ import annotations


import pytest

from tests.e2e import (
    LONG_ANSWER,
    all_text,
    assert_long_answer_delivered,
    make_config,
    running,
    system_prompt,
)
from tests.e2e.harness import settled, slack_taken
from tests.fakes.llm import text
from tests.fakes.slack import FakeSlack, post_http_event

ALICE = "UALICE"
DM = "DALICE"
CHAN = "CDEV"
SIGNING_SECRET = "test-signing-secret"


@pytest.fixture
async def sl():
    async with FakeSlack(bot_user_id="UBOT", bot_token="xoxb-e2e", app_token="xapp-e2e") as f:
        yield f


def slack_config(tmp_path, llm, sl, monkeypatch, **kw):
    monkeypatch.setenv("TEST_SLACK_BOT", sl.bot_token)
    monkeypatch.setenv("TEST_SLACK_APP", sl.app_token)
    monkeypatch.setenv("TEST_SLACK_SIGNING", SIGNING_SECRET)
    section = {
        "enabled": True,
        "bot_token_env": "TEST_SLACK_BOT",
        "app_token_env": "TEST_SLACK_APP",
        "signing_secret_env": "TEST_SLACK_SIGNING",
        "api_base": sl.api_base,
        "allow_from": [ALICE],
        "groups": [CHAN],
        **kw,
    }
    return make_config(tmp_path, llm, channels={"slack": section})


@pytest.fixture
def cfg(tmp_path, llm, sl, monkeypatch):
    return slack_config(tmp_path, llm, sl, monkeypatch)


def dm_event(sl: FakeSlack, txt: str, user: str = ALICE, channel: str = DM, **kw) -> dict:
    return sl.message_event(channel, user, txt, channel_type="im", **kw)


def chat_posts(sl: FakeSlack) -> list[dict]:
    return [c for c in sl.calls if c[0] == "chat.postMessage"]


async def test_dm_gets_reply(cfg, llm, sl):
    llm.script(text("Hello **Alice**!"))
    async with running(cfg) as d:
        env = await sl.push_event(dm_event(sl, "hi there"))
        await sl.wait_for_ack(env)
        posts = await sl.wait_for_posts(1, timeout=15)
        await settled(d, slack_taken(sl))
    assert len(sl.posted) == 1
    assert posts[0]["channel"] == DM
    assert posts[0]["text"] == "Hello *Alice*!"  # Markdown → mrkdwn
    assert posts[0]["thread_ts"] is None
    assert len(llm.requests) == 1 and "hi there" in all_text(llm.requests[0])
    assert "## Group Chat Context" not in system_prompt(llm.requests[0])


async def test_channel_mention_gating_pending_history_and_dedup_of_mention_events(cfg, llm, sl):
    async with running(cfg) as d:
        env = await sl.push_event(
            sl.message_event(CHAN, "UBOB", "the deploy broke at noon", channel_type="channel")
        )
        await sl.wait_for_ack(env)
        await settled(d, slack_taken(sl))
        assert sl.posted == [] and llm.requests == []
        # a channel that is not allowlisted: ignored even with a mention
        await sl.push_event(sl.app_mention_event("COTHER", "UBOB", "<@UBOT> hello"))
        await settled(d, slack_taken(sl))
        assert sl.posted == [] and llm.requests == []
        llm.script(text("Looking into it."))
        # Slack sends both a `message` and an `app_mention` event for one mention
        ts = sl.new_ts()
        await sl.push_event(
            sl.message_event(CHAN, "UBOB", "<@UBOT> what happened?", ts=ts, channel_type="channel")
        )
        await sl.push_event(sl.app_mention_event(CHAN, "UBOB", "<@UBOT> what happened?", ts=ts))
        posts = await sl.wait_for_posts(1, timeout=15)
        await settled(d, slack_taken(sl))
    assert len(sl.posted) == 1 and len(llm.requests) == 1
    assert posts[0]["channel"] == CHAN and posts[0]["text"] == "Looking into it."
    req = llm.requests[0]
    assert "## Group Chat Context" in system_prompt(req)
    body = all_text(req)
    assert "the deploy broke at noon" in body and "what happened?" in body


async def test_no_reply_is_silent(cfg, llm, sl):
    llm.script(text("NO_REPLY"))
    async with running(cfg) as d:
        await sl.push_event(dm_event(sl, "ok thanks"))
        await llm.wait_for_requests(1, timeout=15)
        await settled(d, slack_taken(sl))
    assert sl.posted == [] and chat_posts(sl) == [] and sl.uploads == []


async def test_reply_tag_threads_under_trigger(cfg, llm, sl):
    llm.script(text("[[reply_to_current]] Sure thing"))
    async with running(cfg):
        ts = sl.new_ts()
        await sl.push_event(dm_event(sl, "can you?", ts=ts))
        posts = await sl.wait_for_posts(1, timeout=15)
    assert posts[0]["text"] == "Sure thing"
    assert posts[0]["thread_ts"] == ts


async def test_long_answer_is_chunked_within_limit(cfg, llm, sl):
    assert 5000 < len(LONG_ANSWER) < 9000
    llm.script(text(LONG_ANSWER))
    async with running(cfg) as d:
        await sl.push_event(dm_event(sl, "long please"))
        await sl.wait_for_posts(2, timeout=15)
        await settled(d, slack_taken(sl))
    chunks = [p["text"] for p in sl.posted]
    assert_long_answer_delivered(chunks, 4000)
    assert all(p["channel"] == DM and p["thread_ts"] is None for p in sl.posted)


async def test_media_markers_link_and_upload(cfg, llm, sl):
    llm.script(text("Here you go\n[IMAGE:https://example.com/a.png]\n[DOCUMENT:report.pdf]"))
    async with running(cfg) as d:
        (cfg.agent.workspace / "report.pdf").write_bytes(b"%PDF-1.4 fake")
        await sl.push_event(dm_event(sl, "send files"))
        await sl.wait_for_posts(2, timeout=15)
        await settled(d, slack_taken(sl))
    assert [p["text"] for p in sl.posted] == [
        "Here you go",
        "Image: <https://example.com/a.png|a.png>",
    ]
    assert len(sl.uploads) == 1
    up = sl.uploads[0]
    assert (
        up["filename"] == "report.pdf" and up["bytes"] == b"%PDF-1.4 fake" and up["channel"] == DM
    )
    methods = [c[0] for c in sl.calls]
    assert "files.getUploadURLExternal" in methods and "files.completeUploadExternal" in methods
    # text first, then attachments in order
    assert methods.index("files.getUploadURLExternal") > max(
        i for i, m in enumerate(methods) if m == "chat.postMessage"
    )


async def test_unknown_dm_sender_gets_pairing_code(cfg, llm, sl):
    async with running(cfg) as d:
        await sl.push_event(dm_event(sl, "let me in", user="UEVE", channel="DEVE"))
        posts = await sl.wait_for_posts(2, timeout=15)
        await settled(d, slack_taken(sl))
    assert len(sl.posted) == 2 and posts[0]["channel"] == "DEVE"
    assert "Pairing code" in posts[0]["text"] and "UEVE" in posts[0]["text"]
    # the owner is told in their direct chat (SPEC §17.4), with the same code
    code = posts[0]["text"].split("Pairing code: ")[1][:8]
    assert posts[1]["channel"] == ALICE and f"/pair approve {code}" in posts[1]["text"]
    assert llm.requests == []


async def test_redelivered_event_is_answered_once(cfg, llm, sl):
    llm.script(text("only once"))
    async with running(cfg) as d:
        ev = dm_event(sl, "hello once")
        env1 = await sl.push_event(ev, event_id="Ev0001")
        await sl.wait_for_ack(env1)
        # Slack retries an event it thinks was not acknowledged: same event, new envelope
        env2 = await sl.push_event(ev, event_id="Ev0001", retry_attempt=1)
        await sl.wait_for_ack(env2)
        await sl.wait_for_posts(1, timeout=15)
        await settled(d, slack_taken(sl))
    assert [p["text"] for p in sl.posted] == ["only once"]
    assert len(llm.requests) == 1


# ------------------------------------------------------------------------------ HTTP mode
@pytest.fixture
def http_cfg(tmp_path, llm, sl, monkeypatch):
    return slack_config(tmp_path, llm, sl, monkeypatch, mode="http", listen="127.0.0.1:0")


async def test_http_mode_signature_check_and_dedup(http_cfg, llm, sl):
    llm.script(text("signed and served"))
    async with running(http_cfg) as d:
        url = d.channels["slack"].http_url
        assert url.startswith("http://127.0.0.1:")
        ev = dm_event(sl, "forged message")
        status, _ = await post_http_event(
            url, SIGNING_SECRET, sl.event_callback(ev), bad_signature=True
        )
        assert status == 401
        await settled(d, slack_taken(sl))
        assert llm.requests == [] and sl.posted == []

        ev = dm_event(sl, "real message")
        payload = sl.event_callback(ev, "EvHTTP1")
        status, _ = await post_http_event(url, SIGNING_SECRET, payload)
        assert status == 200
        status, _ = await post_http_event(url, SIGNING_SECRET, payload, retry_num=1)
        assert status == 200
        posts = await sl.wait_for_posts(1, timeout=15)
        await settled(d, slack_taken(sl))
    assert [p["text"] for p in sl.posted] == ["signed and served"] and posts[0]["channel"] == DM
    assert len(llm.requests) == 1
    body = all_text(llm.requests[0])
    assert "real message" in body and "forged message" not in body


async def test_thread_the_bot_is_in_needs_no_mention(cfg, llm, sl):
    llm.script(text("[[reply_to_current]] In the thread."), text("Still here."))
    async with running(cfg) as d:
        root = sl.new_ts()
        await sl.push_event(sl.app_mention_event(CHAN, "UBOB", "<@UBOT> start a thread", ts=root))
        posts = await sl.wait_for_posts(1, timeout=15)
        assert posts[0]["thread_ts"] == root
        await sl.push_event(
            sl.message_event(
                CHAN, "UBOB", "follow-up without mention", thread_ts=root, channel_type="channel"
            )
        )
        posts = await sl.wait_for_posts(2, timeout=15)
        # a thread the bot is not in still needs a mention
        other = sl.new_ts()
        await sl.push_event(
            sl.message_event(
                CHAN,
                "UBOB",
                "other thread reply",
                thread_ts=other,
                channel_type="channel",
                parent_user_id="UBOB",
            )
        )
        await settled(d, slack_taken(sl))
    assert [p["text"] for p in sl.posted] == ["In the thread.", "Still here."]
    assert posts[1]["thread_ts"] == root and posts[1]["channel"] == CHAN
    assert len(llm.requests) == 2
