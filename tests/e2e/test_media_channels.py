"""Images, voice notes and files from Discord, Signal, Slack and the HTTP API reach the model
(SPEC §11), end to end through the wire-level fakes."""

from __future__ import annotations

import base64

import aiohttp
import pytest

from tests.e2e import eventually, make_config, running
from tests.fakes.discord import FakeDiscord
from tests.fakes.llm import text
from tests.fakes.media_samples import decode_data_url, image_bytes, ogg_opus, pdf_bytes
from tests.fakes.signal import FakeSignalCli
from tests.fakes.slack import FakeSlack
from tests.fakes.web import FakeWeb

DC_TOKEN = "discord-test-token"
BOT_ID = 900000000000000001
ALICE = 4242
SIGNAL_BOT, SIGNAL_ALICE = "+15550000001", "+15550000002"
HTTP_TOKEN = "media-test-token-0123456789"


@pytest.fixture(autouse=True)
def _forget_blind_models():
    import bot.media

    bot.media._BLIND.clear()
    yield
    bot.media._BLIND.clear()


def user_turn(request: dict) -> dict:
    return [m for m in request["messages"] if m["role"] == "user"][-1]


def text_of(message: dict) -> str:
    c = message["content"]
    if isinstance(c, list):
        return "\n".join(p.get("text", "") for p in c if p.get("type") == "text")
    return c


# ------------------------------------------------------------------------ Discord
@pytest.fixture
async def dc():
    f = FakeDiscord(bot_id=BOT_ID, bot_name="chela", token=DC_TOKEN)
    await f.start()
    yield f
    await f.stop()


async def test_discord_photo_voice_message_and_pdf(tmp_path, llm, dc, monkeypatch):
    monkeypatch.setenv("TEST_DC_TOKEN", DC_TOKEN)
    section = {
        "enabled": True,
        "token_env": "TEST_DC_TOKEN",
        "api_base": dc.api_base,
        "gateway_url": dc.gateway_url,
        "allow_from": [str(ALICE)],
    }
    cfg = make_config(
        tmp_path,
        llm,
        channels={"discord": section},
        media={
            "vision": "on",
            "image_max_px": 300,
            "transcription_model": "openai/whisper-1",
        },
    )
    llm.transcript = "call the dentist tomorrow"
    async with running(cfg):
        await dc.wait_for_clients(1)
        dm = dc.add_dm_channel(ALICE, "alice")
        await dc.inject_message(
            dm,
            "what's in it?",
            author_id=ALICE,
            username="alice",
            attachments=[
                {
                    "filename": "cat.png",
                    "content_type": "image/png",
                    "data": image_bytes(600, 400, fmt="PNG"),
                }
            ],
        )
        await dc.wait_for_sent(1, timeout=15)
        await dc.inject_message(
            dm,
            "",
            author_id=ALICE,
            username="alice",
            attachments=[
                {
                    "filename": "voice-message.ogg",
                    "content_type": "audio/ogg",
                    "data": ogg_opus(7),
                    "voice": True,
                }
            ],
        )
        await dc.wait_for_sent(2, timeout=15)
        await dc.inject_message(
            dm,
            "summarize",
            author_id=ALICE,
            username="alice",
            attachments=[
                {
                    "filename": "minutes.pdf",
                    "content_type": "application/pdf",
                    "data": pdf_bytes(["Board meeting: budget approved"]),
                }
            ],
        )
        await dc.wait_for_sent(3, timeout=15)
    assert len(llm.image_parts[0]) == 1
    assert decode_data_url(llm.image_parts[0][0]).size == (300, 200)
    assert "[voice note 0:07, transcribed] call the dentist tomorrow" in text_of(
        user_turn(llm.requests[1])
    )
    assert "Board meeting: budget approved" in text_of(user_turn(llm.requests[2]))
    assert len(dc.cdn_downloads) == 3  # fetched after admission, one download each


async def test_discord_stranger_attachments_are_never_downloaded(tmp_path, llm, dc, monkeypatch):
    monkeypatch.setenv("TEST_DC_TOKEN", DC_TOKEN)
    section = {
        "enabled": True,
        "token_env": "TEST_DC_TOKEN",
        "api_base": dc.api_base,
        "gateway_url": dc.gateway_url,
        "allow_from": [str(ALICE)],
    }
    cfg = make_config(tmp_path, llm, channels={"discord": section}, media={"vision": "on"})
    async with running(cfg):
        await dc.wait_for_clients(1)
        stranger = dc.add_dm_channel(999, "mallory")
        await dc.inject_message(
            stranger,
            "hi",
            author_id=999,
            username="mallory",
            attachments=[{"filename": "x.png", "data": image_bytes(10, 10, fmt="PNG")}],
        )
        await dc.wait_for_sent(1, timeout=15)  # the pairing reply
        assert dc.cdn_downloads == [] and llm.requests == []
        # twin: the owner's attachment is fetched
        dm = dc.add_dm_channel(ALICE, "alice")
        await dc.inject_message(
            dm,
            "hi",
            author_id=ALICE,
            username="alice",
            attachments=[{"filename": "y.png", "data": image_bytes(10, 10, fmt="PNG")}],
        )
        await dc.wait_for_sent(2, timeout=15)
    assert len(dc.cdn_downloads) == 1 and len(llm.image_parts[0]) == 1


# ------------------------------------------------------------------------- Signal
@pytest.fixture
async def sig():
    f = FakeSignalCli(account=SIGNAL_BOT, keepalive=0.3)
    await f.start()
    yield f
    await f.stop()


async def test_signal_voice_note_and_photo(tmp_path, llm, sig):
    section = {
        "enabled": True,
        "account": SIGNAL_BOT,
        "http_url": sig.url,
        "allow_from": [SIGNAL_ALICE],
    }
    cfg = make_config(
        tmp_path,
        llm,
        channels={"signal": section},
        media={"vision": "on", "transcription_model": "openai/whisper-1"},
    )

    def stored(content: bytes, filename: str, ctype: str, **extra) -> dict:
        att = sig.write_attachment(content, filename=filename, content_type=ctype)
        # signal-cli names its own stored file: an absolute path the adapter copies from
        return {**att, "storedFilename": str(sig.attachments_dir / att["id"]), **extra}

    async with running(cfg):
        await sig.wait_for_clients(1)
        sig.inject_message(
            SIGNAL_ALICE,
            "",
            attachments=[stored(ogg_opus(65), "voice.ogg", "audio/ogg", voiceNote=True)],
        )
        await sig.wait_for_sent(1, timeout=15)
        sig.inject_message(
            SIGNAL_ALICE,
            "receipt",
            attachments=[stored(image_bytes(2000, 1000), "receipt.jpg", "image/jpeg")],
        )
        await sig.wait_for_sent(2, timeout=15)
    assert "[voice note 1:05, transcribed] this is the transcript" in text_of(
        user_turn(llm.requests[0])
    )
    assert decode_data_url(llm.image_parts[1][0]).size == (1568, 784)


# ----------------------------------------------------------------------- HTTP API
def http_cfg(tmp_path, llm, monkeypatch, allow: list[str] | None = None, **media):
    monkeypatch.setenv("TEST_HTTP_TOKEN", HTTP_TOKEN)
    section = {"enabled": True, "listen": "127.0.0.1:0", "token_env": "TEST_HTTP_TOKEN"}
    return make_config(
        tmp_path,
        llm,
        channels={"http": section},
        media={"vision": "on", "image_max_px": 200, **media},
        tools={"web": {"allow_private_hosts": allow or []}},
    )


async def _ask(port: int, content) -> tuple[int, dict]:
    async with aiohttp.ClientSession() as s:
        async with s.post(
            f"http://127.0.0.1:{port}/v1/chat/completions",
            json={"model": "chela", "messages": [{"role": "user", "content": content}]},
            headers={"Authorization": f"Bearer {HTTP_TOKEN}"},
        ) as r:
            return r.status, await r.json()


async def test_http_image_url_parts_data_and_http(tmp_path, llm, monkeypatch):
    web = FakeWeb()
    await web.start()
    web.files["chart.png"] = (image_bytes(400, 400, fmt="PNG"), "image/png")
    cfg = http_cfg(tmp_path, llm, monkeypatch, allow=["127.0.0.1"])
    data_url = "data:image/jpeg;base64," + base64.b64encode(image_bytes(800, 400)).decode()
    try:
        llm.script(text("two pictures"))
        async with running(cfg) as d:
            port = d.channels["http"].bound_port
            status, body = await _ask(
                port,
                [
                    {"type": "text", "text": "compare these"},
                    {"type": "image_url", "image_url": {"url": data_url}},
                    {
                        "type": "image_url",
                        "image_url": {"url": f"http://127.0.0.1:{web.port}/files/chart.png"},
                    },
                ],
            )
    finally:
        await web.stop()
    assert status == 200 and body["choices"][0]["message"]["content"] == "two pictures"
    sizes = [decode_data_url(u).size for u in llm.image_parts[0]]
    assert sizes == [(200, 100), (200, 200)]
    assert "compare these" in text_of(user_turn(llm.requests[0]))
    assert web.hits == ["/files/chart.png"]


async def test_http_image_url_to_a_private_address_is_refused(tmp_path, llm, monkeypatch):
    web = FakeWeb()
    await web.start()
    web.files["inside.png"] = (image_bytes(50, 50, fmt="PNG"), "image/png")
    cfg = http_cfg(tmp_path, llm, monkeypatch)  # 127.0.0.1 not in allow_private_hosts
    try:
        async with running(cfg) as d:
            port = d.channels["http"].bound_port
            url = f"http://127.0.0.1:{web.port}/files/inside.png"
            status, _ = await _ask(
                port,
                [
                    {"type": "text", "text": "look"},
                    {"type": "image_url", "image_url": {"url": url}},
                ],
            )
            assert status == 200  # the turn runs, without the image
            status, err = await _ask(
                port, [{"type": "image_url", "image_url": {"url": "file:///etc/passwd"}}]
            )
            assert status == 400 and "data: URL or an http(s) URL" in err["error"]["message"]
    finally:
        await web.stop()
    assert web.hits == []  # never contacted
    turn = text_of(user_turn(llm.requests[0]))
    assert "image not loaded:" in turn and "blocked address" in turn
    assert llm.image_parts == [[]] and len(llm.requests) == 1


async def test_http_oversized_data_url_is_refused_with_a_note(tmp_path, llm, monkeypatch):
    cfg = http_cfg(tmp_path, llm, monkeypatch, max_download_mb=0.01)
    big = (
        "data:image/png;base64,"
        + base64.b64encode(image_bytes(100, 100, fmt="PNG", noise=True)).decode()
    )
    small = "data:image/png;base64," + base64.b64encode(image_bytes(20, 20, fmt="PNG")).decode()
    async with running(cfg) as d:
        port = d.channels["http"].bound_port
        status, _ = await _ask(port, [{"type": "image_url", "image_url": {"url": big}}])
        assert status == 200
        status, _ = await _ask(port, [{"type": "image_url", "image_url": small}])  # bare string
        assert status == 200
    await eventually(lambda: len(llm.requests) == 2)
    assert "larger than 0.01 MB" in text_of(user_turn(llm.requests[0]))
    assert llm.image_parts[0] == [] and len(llm.image_parts[1]) == 1


# -------------------------------------------------------------------------- Slack
SLACK_ALICE, SLACK_DM = "UALICE", "DALICE"


@pytest.fixture
async def sl():
    async with FakeSlack(bot_user_id="UBOT", bot_token="xoxb-media", app_token="xapp-media") as f:
        yield f


def slack_cfg(tmp_path, llm, sl, monkeypatch, *, media: dict | None = None, **section):
    monkeypatch.setenv("TEST_SLACK_BOT", sl.bot_token)
    monkeypatch.setenv("TEST_SLACK_APP", sl.app_token)
    sec = {
        "enabled": True,
        "bot_token_env": "TEST_SLACK_BOT",
        "app_token_env": "TEST_SLACK_APP",
        "api_base": sl.api_base,
        "allow_from": [SLACK_ALICE],
        **section,
    }
    return make_config(
        tmp_path, llm, channels={"slack": sec}, media={"vision": "on", **(media or {})}
    )


async def slack_dm(sl: FakeSlack, txt: str, files: list[dict], user: str = SLACK_ALICE) -> None:
    channel = SLACK_DM if user == SLACK_ALICE else f"D{user}"
    env = await sl.push_event(sl.message_event(channel, user, txt, channel_type="im", files=files))
    await sl.wait_for_ack(env)


async def test_slack_image_file_reaches_the_model_resized(tmp_path, llm, sl, monkeypatch):
    cfg = slack_cfg(tmp_path, llm, sl, monkeypatch, media={"image_max_px": 400})
    llm.script(text("A red and blue square."))
    f = sl.add_file("cat.png", image_bytes(1600, 1200, fmt="PNG"), "image/png")
    async with running(cfg):
        await slack_dm(sl, "what is this?", [f])
        posts = await sl.wait_for_posts(1, timeout=15)
    assert posts[0]["text"] == "A red and blue square."
    assert sl.downloads == [f["id"]]  # fetched once, with the bot token (the fake checks it)
    assert len(llm.image_parts[0]) == 1
    img = decode_data_url(llm.image_parts[0][0])
    assert img.format == "JPEG" and img.size == (400, 300)
    turn = user_turn(llm.requests[0])
    assert "what is this?" in text_of(turn) and "media" not in turn


async def test_slack_pdf_and_text_files_are_inline_untrusted(tmp_path, llm, sl, monkeypatch):
    cfg = slack_cfg(tmp_path, llm, sl, monkeypatch)
    pdf = sl.add_file(
        "minutes.pdf", pdf_bytes(["Board meeting: budget approved"]), "application/pdf"
    )
    notes = sl.add_file("todo.md", b"# Todo\n- renew the passport\n", "text/markdown")
    async with running(cfg):
        await slack_dm(sl, "summarize", [pdf, notes])
        await sl.wait_for_posts(1, timeout=15)
    assert sorted(sl.downloads) == sorted([pdf["id"], notes["id"]])
    turn = text_of(user_turn(llm.requests[0]))
    assert "summarize" in turn
    assert 'Attached PDF (1 pages) from "minutes.pdf". Untrusted data' in turn
    assert 'Attached text document from "todo.md". Untrusted data' in turn
    assert "Board meeting: budget approved" in turn and "- renew the passport" in turn
    assert turn.count("<<<untrusted ") == 2 and turn.count("<<<end untrusted ") == 2
    assert llm.image_parts == [[]]


async def test_slack_stranger_files_are_never_downloaded(tmp_path, llm, sl, monkeypatch):
    cfg = slack_cfg(tmp_path, llm, sl, monkeypatch)  # dm_policy = "pairing"
    theirs = sl.add_file("x.png", image_bytes(50, 50, fmt="PNG"), "image/png")
    mine = sl.add_file("y.png", image_bytes(50, 50, fmt="PNG"), "image/png")
    async with running(cfg):
        await slack_dm(sl, "hi", [theirs], user="UMALLORY")
        await sl.wait_for_posts(1, timeout=15)  # the pairing reply
        assert sl.downloads == [] and llm.requests == []
        # twin: the owner's file is fetched and reaches the model
        await slack_dm(sl, "hi", [mine])
        await sl.wait_for_posts(2, timeout=15)
    assert sl.downloads == [mine["id"]]
    assert len(llm.requests) == 1 and len(llm.image_parts[0]) == 1


async def test_long_document_note_mentions_read_only_when_the_turn_has_it(
    tmp_path, llm, sl, monkeypatch
):
    # the owner's turns have `read`; a guest's do not (tools.guest = ["session_status"])
    cfg = slack_cfg(
        tmp_path, llm, sl, monkeypatch, media={"max_document_chars": 100}, dm_policy="open"
    )
    body = b"line of a long log\n" * 40
    async with running(cfg):
        await slack_dm(sl, "", [sl.add_file("owner.log", body, "text/plain")])
        await sl.wait_for_posts(1, timeout=15)
        await slack_dm(sl, "", [sl.add_file("guest.log", body, "text/plain")], user="UGUEST")
        await sl.wait_for_posts(2, timeout=15)
    owner = text_of(user_turn(llm.requests[0]))
    guest = text_of(user_turn(llm.requests[1]))
    assert "too long to show here; saved as inbox/owner.log (open it with the read tool" in owner
    assert "too long to show here; saved as inbox/guest.log (" in guest
    assert "no tool of this conversation can open it" in guest
    assert "read tool" not in guest
    assert "line of a long log\nline" not in owner + guest
    assert (cfg.agent.workspace / "inbox" / "owner.log").read_bytes() == body
    assert not (cfg.agent.workspace / "inbox" / "guest.log").exists()
