"""The FakeTelegram Bot API server itself (raw HTTP and python-telegram-bot)."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest
import telegram
from telegram.error import BadRequest, InvalidToken

from tests.fakes.telegram import FakeTelegram


@pytest.fixture
async def fake():
    f = FakeTelegram()
    await f.start()
    yield f
    await f.stop()


@pytest.fixture
async def http():
    async with aiohttp.ClientSession() as session:
        yield session


@pytest.fixture
async def bot(fake):
    b = telegram.Bot(fake.token, base_url=fake.base_url, base_file_url=fake.base_file_url)
    await b.initialize()
    yield b
    await b.shutdown()


async def test_wrong_token_is_401(fake, http):
    async with http.post(f"{fake.base_url}999:NOPE/getMe") as r:
        assert r.status == 401
        assert r.content_type == "application/json"
        assert await r.json() == {"ok": False, "error_code": 401, "description": "Unauthorized"}
    b = telegram.Bot("999:NOPE", base_url=fake.base_url)
    with pytest.raises(InvalidToken):
        await b.initialize()


async def test_get_me_envelope(fake, http):
    async with http.get(f"{fake.base_url}{fake.token}/getMe") as r:
        body = await r.json()
    assert r.content_type == "application/json"
    assert body["ok"] is True
    assert body["result"]["username"] == "chela_bot" and body["result"]["is_bot"] is True
    assert body["result"]["id"] == 123


async def test_unknown_method_is_404(fake, http):
    async with http.post(f"{fake.base_url}{fake.token}/frobnicate") as r:
        assert r.status == 404
        assert (await r.json())["ok"] is False


async def test_long_poll_returns_early_and_offset_confirms(fake, bot):
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    poll = asyncio.create_task(bot.get_updates(timeout=10))
    await asyncio.sleep(0.2)
    uid = fake.inject_message(1, "hi", from_id=1)
    updates = await asyncio.wait_for(poll, 5)
    assert loop.time() - t0 < 3
    assert [u.update_id for u in updates] == [uid]
    assert updates[0].message.text == "hi"
    # not confirmed yet: delivered again
    assert [u.update_id for u in await bot.get_updates(timeout=0)] == [uid]
    assert await bot.get_updates(offset=uid + 1, timeout=0) == ()
    assert fake.confirmed_offset == uid + 1
    assert fake.pending_updates == []


async def test_long_poll_times_out_empty(fake, bot):
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    assert await bot.get_updates(timeout=1) == ()
    assert 0.9 <= loop.time() - t0 < 3


async def test_limit(fake, bot):
    ids = [fake.inject_message(1, f"m{i}", from_id=1) for i in range(5)]
    got = await bot.get_updates(limit=2, timeout=0)
    assert [u.update_id for u in got] == ids[:2]


async def test_overlapping_poll_gets_conflict(fake, http):
    url = f"{fake.base_url}{fake.token}/getUpdates"
    first = asyncio.create_task(http.post(url, json={"timeout": 5}))
    await asyncio.sleep(0.2)
    second = asyncio.create_task(http.post(url, json={"timeout": 0}))
    r1 = await asyncio.wait_for(first, 3)
    assert r1.status == 409
    assert (await (await second).json())["ok"] is True


async def test_send_message_records_and_html_validation(fake, bot):
    m = await bot.send_message(5, "<b>hi</b> &amp; bye", parse_mode="HTML")
    assert m.message_id == 1 and m.text == "hi & bye" and m.from_user.id == fake.bot_id
    assert fake.sent[0].text == "<b>hi</b> &amp; bye" and fake.sent[0].visible_text == "hi & bye"
    for bad in ("<b>open", "a < b", "<blink>x</blink>", "<b><i>x</b></i>", "&nbsp;"):
        with pytest.raises(BadRequest, match="(?i)can't parse entities"):
            await bot.send_message(5, bad, parse_mode="HTML")
    with pytest.raises(BadRequest, match="(?i)too long"):
        await bot.send_message(5, "x" * 4097)
    with pytest.raises(BadRequest, match="(?i)empty"):
        await bot.send_message(5, "   ")
    await bot.send_message(5, "😀" * 2048)  # 4096 UTF-16 units: fits
    with pytest.raises(BadRequest, match="(?i)too long"):
        await bot.send_message(5, "😀" * 2049)
    m2 = await bot.send_message(5, "second", reply_parameters=telegram.ReplyParameters(1))
    assert m2.message_id == 3 and m2.reply_to_message.message_id == 1
    with pytest.raises(BadRequest, match="(?i)replied not found"):
        await bot.send_message(5, "x", reply_parameters=telegram.ReplyParameters(99))


async def test_form_encoded_and_fail_next(fake, http):
    url = f"{fake.base_url}{fake.token}/sendMessage"
    fake.fail_next("sendMessage", status=429, retry_after=3)
    async with http.post(url, data={"chat_id": "7", "text": "hey"}) as r:
        assert r.status == 429
        assert (await r.json())["parameters"] == {"retry_after": 3}
    async with http.post(url, data={"chat_id": "7", "text": "hey", "message_thread_id": "4"}) as r:
        body = await r.json()
    assert body["ok"] and body["result"]["chat"]["id"] == 7
    assert fake.sent[0].chat_id == 7 and fake.sent[0].message_thread_id == 4


async def test_upload_getfile_download_roundtrip(fake, bot, tmp_path):
    m = await bot.send_document(9, telegram.InputFile(b"abc123", filename="a.txt"), caption="doc")
    assert m.document.file_name == "a.txt" and m.caption == "doc"
    s = fake.sent[0]
    assert (s.method, s.kind, s.filename, s.data) == (
        "sendDocument",
        "document",
        "a.txt",
        b"abc123",
    )
    f = await bot.get_file(m.document.file_id)
    target = await f.download_to_drive(tmp_path / "out.txt")
    assert target.read_bytes() == b"abc123"
    # re-send by file_id
    await bot.send_document(9, m.document.file_id)
    assert fake.sent[1].data == b"abc123"
    with pytest.raises(BadRequest, match="(?i)invalid file_id"):
        await bot.get_file("nope")


async def test_url_media_and_reject_urls(fake, bot):
    await bot.send_photo(3, "https://example.com/x.png")
    assert fake.sent[0].url == "https://example.com/x.png" and fake.sent[0].kind == "photo"
    fake.reject_urls = True
    with pytest.raises(BadRequest, match="(?i)wrong file identifier/HTTP URL specified"):
        await bot.send_photo(3, "https://example.com/x.png")


async def test_edit_reaction_action(fake, bot):
    m = await bot.send_message(3, "v1")
    await bot.edit_message_text("v2", chat_id=3, message_id=m.message_id)
    assert fake.sent[0].edits == ["v2"]
    await bot.set_message_reaction(3, m.message_id, "👍")
    await bot.send_chat_action(3, "typing")
    assert fake.reactions == [(3, 1, [{"type": "emoji", "emoji": "👍"}])]
    assert fake.chat_actions == [(3, "typing", None)]


async def test_stall_next_poll(fake, bot):
    fake.stall_next_poll(30)
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(bot.get_updates(timeout=0), 0.5)
    assert await bot.get_updates(timeout=0) == ()


async def test_message_ids_per_chat_shared_with_injected(fake, bot):
    fake.inject_message(1, "a", from_id=1)
    fake.inject_message(2, "b", from_id=2)
    m = await bot.send_message(1, "c")
    assert m.message_id == 2
    assert fake.messages[(2, 1)]["text"] == "b"
