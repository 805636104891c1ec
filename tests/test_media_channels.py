"""Images, voice notes and files from Discord, Signal and the HTTP API reach the model
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
