"""The Discord adapter, driven through the real discord.py client against tests/fakes/discord.py."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from channels.base import ChannelError, MediaItem, MediaTooLarge, OutboundMessage
from channels.discord import DiscordChannel
from tests.fakes.discord import FakeDiscord
from tests.fakes.sink import Sink

BOT_ID = 900000000000000001
USER_ID = 800000000000000042
OTHER_BOT_ID = 700000000000000007
GUILD_ID = 600000000000000010
CHAN_ID = 600000000000000011
THREAD_ID = 600000000000000012
TOKEN = "fake-token"


@pytest.fixture
async def fake():
    f = FakeDiscord(bot_id=BOT_ID, bot_name="chela", token=TOKEN)
    await f.start()
    f.add_guild(
        GUILD_ID,
        "Test Guild",
        channels=[
            {"id": CHAN_ID, "name": "general"},
            {"id": THREAD_ID, "name": "side-topic", "type": 11, "parent_id": CHAN_ID},
        ],
    )
    yield f
    await f.stop()


def _adapter(fake: FakeDiscord, tmp_path, token: str = TOKEN, **kw) -> DiscordChannel:
    kw.setdefault("ready_timeout", 5.0)
    return DiscordChannel(
        token=token,
        api_base=fake.api_base,
        gateway_url=fake.gateway_url,
        media_dir=tmp_path,
        guild_ready_timeout=0.05,
        **kw,
    )


@pytest.fixture
async def connected(fake, tmp_path):
    sink = Sink()
    ch = _adapter(fake, tmp_path)
    await ch.start(sink)
    yield ch, sink
    await ch.stop()


async def test_connects_and_becomes_ready(fake, connected):
    ch, _ = connected
    assert ch.bot_identity["id"] == str(BOT_ID)
    assert ch.bot_identity["username"] == "chela"
    assert ch.capabilities.max_text == 2000
    assert set(ch.capabilities.names()) == {"reactions", "media", "threads", "typing"}
    ident = fake.identifies[0]
    assert ident["token"] == TOKEN
    intents = ident["intents"]
    import discord

    got = discord.Intents._from_value(intents)
    assert got.message_content and got.dm_messages and got.guild_messages
    paths = [c["path"] for c in fake.calls]
    assert "/users/@me" in paths and "/oauth2/applications/@me" in paths
    from discord.gateway import DiscordWebSocket
    from discord.http import Route

    # the fake's bases are this client's own: discord.py's class attributes stay as they were
    assert Route.BASE == "https://discord.com/api/v10"
    assert str(DiscordWebSocket.DEFAULT_GATEWAY) == "wss://gateway.discord.gg/"
    await ch.stop()
    await ch.stop()  # idempotent
    assert Route.BASE == "https://discord.com/api/v10"
    assert str(DiscordWebSocket.DEFAULT_GATEWAY) == "wss://gateway.discord.gg/"


async def test_two_accounts_with_different_bases_each_reach_their_own_server(tmp_path):
    """Two Discord adapters in one process, each pointed at its own server: every login,
    gateway connection, inbound message and send stays with its own server, and discord.py's
    process-wide ``Route.BASE`` / ``DEFAULT_GATEWAY`` are never touched."""
    from discord.gateway import DiscordWebSocket
    from discord.http import Route

    base, gateway = Route.BASE, DiscordWebSocket.DEFAULT_GATEWAY
    fakes = [FakeDiscord(bot_id=BOT_ID + i, bot_name=f"bot{i}", token=f"tok{i}") for i in (0, 1)]
    adapters: list[DiscordChannel] = []
    try:
        for i, f in enumerate(fakes):
            await f.start()
            f.add_guild(GUILD_ID, "Guild", channels=[{"id": CHAN_ID, "name": "general"}])
            adapters.append(_adapter(f, tmp_path, token=f"tok{i}", account=f"acct{i}"))
        sinks = [Sink(), Sink()]
        for ch, sink in zip(adapters, sinks, strict=True):
            await ch.start(sink)
            assert (base, gateway) == (Route.BASE, DiscordWebSocket.DEFAULT_GATEWAY)
        assert [ch.bot_identity["username"] for ch in adapters] == ["bot0", "bot1"]
        for i, (f, sink) in enumerate(zip(fakes, sinks, strict=True)):
            dm = f.add_dm_channel(USER_ID, "alice")
            await f.inject_message(dm, f"to bot{i}", author_id=USER_ID, username="alice")
            [msg] = await sink.wait(1)
            assert (msg.account, msg.text) == (f"acct{i}", f"to bot{i}")
        for i, ch in enumerate(adapters):
            await ch.send(OutboundMessage(chat_id=str(CHAN_ID), text=f"from bot{i}"))
        for i, f in enumerate(fakes):
            assert [m["content"] for m in f.sent] == [f"from bot{i}"]
            assert [ident["token"] for ident in f.identifies] == [f"tok{i}"]
            assert {c["path"] for c in f.calls} >= {"/users/@me", f"/channels/{CHAN_ID}/messages"}
    finally:
        for ch in adapters:
            await ch.stop()
        for f in fakes:
            await f.stop()
    assert (base, gateway) == (Route.BASE, DiscordWebSocket.DEFAULT_GATEWAY)


async def test_dm_message(fake, connected):
    _ch, sink = connected
    dm = fake.add_dm_channel(USER_ID, "alice")
    mid = await fake.inject_message(
        dm, "hello there", author_id=USER_ID, username="alice", global_name="Alice A"
    )
    [msg] = await sink.wait(1)
    assert msg.channel == "discord"
    assert msg.chat_type == "direct"
    assert msg.chat_id == str(dm)
    assert msg.sender_id == str(USER_ID)
    assert msg.sender_name == "Alice A"
    assert msg.sender_username == "alice"
    assert msg.text == "hello there"
    assert msg.message_id == msg.raw_id == str(mid)
    assert msg.thread_id is None and not msg.mentioned and not msg.sender_is_bot
    assert msg.timestamp > 0


async def test_guild_mention(fake, connected):
    _, sink = connected
    await fake.inject_message(
        CHAN_ID, f"<@{BOT_ID}> what's up", author_id=USER_ID, username="alice", mentions=[BOT_ID]
    )
    await fake.inject_message(CHAN_ID, "just chatting", author_id=USER_ID, username="alice")
    first, second = await sink.wait(2)
    assert first.chat_type == "group" and first.group_kind == "channel"
    assert first.chat_id == str(CHAN_ID)
    assert first.mentioned is True
    assert first.chat_title == "#general"
    assert second.mentioned is False


async def test_reply_to_bot_message(fake, connected):
    ch, sink = connected
    [bot_mid] = await ch.send(OutboundMessage(chat_id=str(CHAN_ID), text="I am the bot"))
    other = await fake.inject_message(
        CHAN_ID, "someone else", author_id=USER_ID + 1, username="bob"
    )
    await fake.inject_message(
        CHAN_ID,
        "replying to you",
        author_id=USER_ID,
        username="alice",
        referenced_message_id=int(bot_mid),
    )
    await fake.inject_message(
        CHAN_ID, "replying to bob", author_id=USER_ID, username="alice", referenced_message_id=other
    )
    items = await sink.wait(3)
    assert [m.text for m in items] == [
        "someone else",
        "replying to you",
        "replying to bob",
    ]  # own echo dropped
    assert items[1].reply_to_id == bot_mid and items[1].reply_to_bot is True
    assert items[2].reply_to_id == str(other) and items[2].reply_to_bot is False


async def test_thread_message(fake, connected):
    ch, sink = connected
    mid = await fake.inject_message(THREAD_ID, "in a thread", author_id=USER_ID, username="alice")
    [msg] = await sink.wait(1)
    assert msg.chat_id == str(CHAN_ID)
    assert msg.thread_id == str(THREAD_ID)
    assert msg.chat_type == "group"
    # replies and reactions go to the thread
    await ch.send(
        OutboundMessage(chat_id=msg.chat_id, thread_id=msg.thread_id, text="thread reply")
    )
    await ch.react(msg.chat_id, str(mid), "👀")
    assert fake.sent[-1]["channel_id"] == THREAD_ID
    assert fake.reactions == [{"channel_id": THREAD_ID, "message_id": mid, "emoji": "👀"}]


async def test_uncached_thread_resolved_via_rest(fake, connected):
    _, sink = connected
    late = THREAD_ID + 100
    fake.add_thread(GUILD_ID, late, CHAN_ID, "late-topic", announce=False)
    await fake.inject_message(late, "first", author_id=USER_ID, username="alice")
    await fake.inject_message(late, "second", author_id=USER_ID, username="alice")
    dm = fake.add_dm_channel(USER_ID, "alice")
    await fake.inject_message(dm, "third", author_id=USER_ID, username="alice")
    first, second, _third = await sink.wait(3)
    assert [m.text for m in sink.messages] == ["first", "second", "third"]  # arrival order kept
    assert (first.chat_id, first.thread_id) == (str(CHAN_ID), str(late))
    assert (second.chat_id, second.thread_id) == (str(CHAN_ID), str(late))
    gets = [c for c in fake.calls if c["method"] == "GET" and c["path"] == f"/channels/{late}"]
    assert len(gets) == 1  # looked up once, then remembered


async def test_own_messages_dropped_other_bots_flagged(fake, connected):
    ch, sink = connected
    await ch.send(OutboundMessage(chat_id=str(CHAN_ID), text="from me"))
    await fake.inject_message(CHAN_ID, "spoofed self", author_id=BOT_ID, username="chela", bot=True)
    await fake.inject_message(
        CHAN_ID, "beep", author_id=OTHER_BOT_ID, username="otherbot", bot=True
    )
    [msg] = await sink.wait(1)
    await asyncio.sleep(0.05)
    assert len(sink.messages) == 1
    assert msg.text == "beep" and msg.sender_is_bot is True


async def test_long_text_chunked_with_reference(fake, connected):
    ch, _ = connected
    paragraphs = [("word " * 60).strip() for _ in range(16)]  # 16 × 299 chars ≈ 5000
    text = "\n\n".join(paragraphs)
    assert len(text) >= 4800
    ids = await ch.send(
        OutboundMessage(chat_id=str(CHAN_ID), text=text, reply_to_id="12345", reply_mode="first")
    )
    assert len(ids) == len(fake.sent) >= 3
    for rec in fake.sent:
        assert len(rec["content"]) <= 2000
        assert rec["content"].count("\n") + 1 <= 17
    assert fake.sent[0]["message_reference"]["message_id"] in (12345, "12345")
    assert fake.sent[0]["message_reference"]["fail_if_not_exists"] is False
    assert all(rec["message_reference"] is None for rec in fake.sent[1:])
    assert [str(r["id"]) for r in fake.sent] == ids


async def test_long_text_5000_chars_three_messages(fake, connected):
    ch, _ = connected
    ids = await ch.send(OutboundMessage(chat_id=str(CHAN_ID), text="x" * 5000))
    assert len(ids) == 3
    assert [len(r["content"]) for r in fake.sent] == [2000, 2000, 1000]


async def test_reply_mode_all(fake, connected):
    ch, _ = connected
    await ch.send(
        OutboundMessage(chat_id=str(CHAN_ID), text="a" * 3000, reply_to_id="777", reply_mode="all")
    )
    assert len(fake.sent) == 2
    assert all(r["message_reference"]["message_id"] in (777, "777") for r in fake.sent)


async def test_file_upload_and_media(fake, connected, tmp_path):
    ch, _ = connected
    f1 = tmp_path / "report.txt"
    f1.write_bytes(b"hello bytes")
    f2 = tmp_path / "pic.png"
    f2.write_bytes(b"\x89PNG fake")
    dm = fake.add_dm_channel(USER_ID, "alice")
    ids = await ch.send(
        OutboundMessage(
            chat_id=str(dm),
            text="here you go",
            media=[
                MediaItem(kind="document", target=str(f1)),
                MediaItem(kind="image", target=str(f2), name="picture.png"),
                MediaItem(kind="image", target="https://example.com/cat.jpg"),
                MediaItem(kind="document", target=str(tmp_path / "missing.pdf")),
            ],
        )
    )
    assert len(ids) == 3
    text, upload, links = fake.sent
    assert text["content"] == "here you go"
    assert [(f["filename"], f["data"]) for f in upload["files"]] == [
        ("report.txt", b"hello bytes"),
        ("picture.png", b"\x89PNG fake"),
    ]
    assert "payload_json" not in [f["field"] for f in upload["files"]]
    assert links["content"] == "https://example.com/cat.jpg\n[attachment unavailable: missing.pdf]"


async def test_upload_failure_becomes_note(fake, connected, tmp_path):
    ch, _ = connected
    f1 = tmp_path / "big.bin"
    f1.write_bytes(b"x" * 10)
    fake.fail_next(
        f"POST /channels/{CHAN_ID}/messages",
        status=413,
        body={"message": "Request entity too large", "code": 40005},
    )
    ids = await ch.send(
        OutboundMessage(chat_id=str(CHAN_ID), media=[MediaItem(kind="document", target=str(f1))])
    )
    assert len(ids) == 1
    assert fake.sent[0]["content"] == "[attachment unavailable: big.bin]"


async def test_rate_limit_retried(fake, connected):
    ch, _ = connected
    fake.fail_next(f"POST /channels/{CHAN_ID}/messages", status=429, retry_after=0.2)
    t0 = time.monotonic()
    ids = await ch.send(OutboundMessage(chat_id=str(CHAN_ID), text="after the limit"))
    elapsed = time.monotonic() - t0
    assert len(ids) == 1 and fake.sent[0]["content"] == "after the limit"
    statuses = [c["status"] for c in fake.calls if c["path"] == f"/channels/{CHAN_ID}/messages"]
    assert statuses == [429, 200]
    assert elapsed >= 0.18


async def test_nothing_delivered_raises(fake, connected):
    ch, _ = connected
    with pytest.raises(ChannelError):
        await ch.send(OutboundMessage(chat_id="123456789", text="nowhere"))  # unknown channel → 404


async def test_typing_and_reaction(fake, connected):
    ch, sink = connected
    dm = fake.add_dm_channel(USER_ID, "alice")
    mid = await fake.inject_message(dm, "hi", author_id=USER_ID, username="alice")
    [msg] = await sink.wait(1)
    await ch.typing(msg.chat_id)
    await ch.react(msg.chat_id, msg.message_id, "👍")
    await ch.react(msg.chat_id, "999", "👍")  # unknown message: logged, not raised
    assert fake.typing == [dm]
    assert fake.reactions == [{"channel_id": dm, "message_id": mid, "emoji": "👍"}]


async def test_send_to_user_opens_dm(fake, connected):
    ch, _ = connected
    await ch.send(OutboundMessage(chat_id=f"user:{USER_ID}", text="proactive"))
    assert fake.sent[0]["channel_id"] == fake.add_dm_channel(USER_ID)


async def test_inbound_attachment(fake, connected, tmp_path):
    ch, sink = connected
    before = sorted(tmp_path.rglob("*"))
    dm = fake.add_dm_channel(USER_ID, "alice")
    await fake.inject_message(
        dm,
        "see pic",
        author_id=USER_ID,
        username="alice",
        attachments=[
            {"filename": "a.png", "content_type": "image/png", "data": b"\x89PNG-bytes"},
            {"filename": "notes.txt", "data": b"x" * 100},
        ],
    )
    [msg] = await sink.wait(1)
    kinds = [(a.kind, a.name) for a in msg.attachments]
    assert kinds == [("image", "a.png"), ("document", "notes.txt")]
    # nothing is downloaded at intake (SPEC §9.4): the CDN URL is only a reference
    assert all(a.target == "" and a.ref.startswith("http") for a in msg.attachments)
    assert sorted(tmp_path.rglob("*")) == before and fake.cdn_downloads == []
    dest = tmp_path / "inbound"
    dest.mkdir(mode=0o700)
    got = await ch.fetch_media(msg.attachments[0], dest, 1000)  # after admission: fetched
    assert Path(got.target).read_bytes() == b"\x89PNG-bytes"
    assert oct(Path(got.target).stat().st_mode & 0o777) == "0o600"
    with pytest.raises(MediaTooLarge):  # over the cap: refused, nothing left behind
        await ch.fetch_media(msg.attachments[1], dest, 50)
    assert list(dest.iterdir()) == [Path(got.target)]


async def test_bad_token_raises_quickly(fake, tmp_path):
    ch = _adapter(fake, tmp_path, token="wrong")
    t0 = time.monotonic()
    with pytest.raises(ChannelError, match="login failed"):
        await ch.start(Sink())
    assert time.monotonic() - t0 < 2
    await ch.stop()


async def test_no_ready_times_out(tmp_path):
    fake = FakeDiscord(bot_id=BOT_ID, token=TOKEN, send_ready=False)
    await fake.start()
    try:
        ch = _adapter(fake, tmp_path, ready_timeout=0.5)
        with pytest.raises(ChannelError, match="READY"):
            await ch.start(Sink())
        await ch.stop()
    finally:
        await fake.stop()


async def test_privileged_intent_missing(tmp_path):
    fake = FakeDiscord(bot_id=BOT_ID, token=TOKEN, identify_close_code=4014)
    await fake.start()
    try:
        ch = _adapter(fake, tmp_path)
        with pytest.raises(ChannelError, match="Message Content"):
            await ch.start(Sink())
        await ch.stop()
    finally:
        await fake.stop()


async def test_no_mass_mentions(fake, connected):
    ch, _ = connected
    await ch.send(OutboundMessage(chat_id=str(CHAN_ID), text="@everyone look"))
    allowed = fake.sent[0]["body"]["allowed_mentions"]
    assert "everyone" not in allowed.get("parse", [])
    assert "roles" not in allowed.get("parse", [])


async def test_send_when_not_started_raises(tmp_path):
    ch = DiscordChannel(token=TOKEN, media_dir=tmp_path)
    with pytest.raises(ChannelError):
        await ch.send(OutboundMessage(chat_id="1", text="x"))


async def test_open_for_sending_uses_rest_only(fake, tmp_path):
    ch = _adapter(fake, tmp_path)
    await ch.open_for_sending()
    try:
        ids = await ch.send(OutboundMessage(chat_id=str(CHAN_ID), text="reminder"))
    finally:
        await ch.stop()
    assert len(ids) == 1 and fake.sent[0]["content"] == "reminder"
    assert fake.identifies == []  # never opened the gateway


async def test_open_for_sending_reports_a_bad_token(fake, tmp_path):
    ch = _adapter(fake, tmp_path, token="wrong")
    with pytest.raises(ChannelError, match="login failed"):
        await ch.open_for_sending()
    await ch.stop()
