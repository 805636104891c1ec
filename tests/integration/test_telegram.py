"""TelegramChannel against the wire-level FakeTelegram, with the real python-telegram-bot."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import pytest

from channels.base import ChannelError, MediaItem, MediaTooLarge, OutboundMessage
from channels.telegram import TelegramChannel
from tests.fakes.sink import Sink
from tests.fakes.telegram import FakeTelegram

BOT_ID = 777000

# PTB's own RetryAfter constructor trips its retry_after deprecation warning; not ours to fix.
pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")


@pytest.fixture
async def fake():
    f = FakeTelegram(token=f"{BOT_ID}:SECRET", bot_username="chela_bot")
    await f.start()
    yield f
    await f.stop()


@pytest.fixture
async def make_channel(fake, tmp_path):
    channels: list[TelegramChannel] = []

    def _make(**kw) -> TelegramChannel:
        opts = dict(
            token=fake.token,
            api_base=fake.api_base,
            media_dir=tmp_path / "media",
            poll_timeout=1,
            stall_timeout=3,
            backoff_initial=0.05,
            backoff_max=0.2,
        )
        opts.update(kw)
        ch = TelegramChannel(**opts)
        channels.append(ch)
        return ch

    yield _make
    for ch in channels:
        await ch.stop()


@pytest.fixture
async def channel(make_channel):
    ch = make_channel()
    yield ch
    await ch.stop()


@pytest.fixture
async def started(channel):
    sink = Sink()
    await channel.start(sink)
    return channel, sink


# ---------------------------------------------------------------------------- start / stop


async def test_start_identity_and_webhook_deleted(fake, started):
    ch, _ = started
    assert ch.bot_identity == {"id": str(BOT_ID), "username": "chela_bot"}
    assert fake.webhook_deleted == 1
    assert ch.capabilities.names() == ["inline_buttons", "media", "reactions", "threads", "typing"]
    assert ch.capabilities.max_text == 4000
    await ch.stop()
    await ch.stop()  # idempotent


async def test_wrong_token_raises_channel_error(fake, make_channel):
    ch = make_channel(token="999:WRONG")
    with pytest.raises(ChannelError, match="401|rejected"):
        await ch.start(Sink())
    assert not ch.running
    await ch.stop()


async def test_unreachable_server_raises_channel_error(make_channel):
    with socket.socket() as s:  # a port that was free a moment ago: connection refused
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ch = make_channel(api_base=f"http://127.0.0.1:{port}", start_timeout=5)
    with pytest.raises(ChannelError):
        await ch.start(Sink())
    await ch.stop()


# ---------------------------------------------------------------------------- inbound


async def test_dm_translated(fake, started, tmp_path):
    _ch, sink = started
    uid = fake.inject_message(
        42,
        "hello there",
        from_id=42,
        username="alice",
        first_name="Alice",
        last_name="Liddell",
        date=1_700_000_000,
    )
    [m] = await sink.wait(1)
    assert m.channel == "telegram"
    assert m.chat_id == "42" and m.chat_type == "direct"
    assert m.sender_id == "42" and m.sender_name == "Alice Liddell" and m.sender_username == "alice"
    assert m.text == "hello there"
    assert m.message_id == "1" and m.raw_id == str(uid)
    assert m.thread_id is None and m.reply_to_id is None
    assert not m.mentioned and not m.reply_to_bot and not m.sender_is_bot
    assert m.timestamp == 1_700_000_000.0
    assert m.account == "default" and m.group_kind == "group" and m.chat_title == ""
    await fake.wait_for_offset(uid + 1)


@pytest.mark.parametrize(
    "text, entities, expected",
    [
        ("hey @chela_bot what's up", None, True),
        ("hey @CHELA_BOT!", None, True),
        ("hey @chela_botty", None, False),
        ("mail me at x@chela_bot", None, False),
        ("hi there", None, False),
        ("/status@chela_bot", [{"type": "bot_command", "offset": 0, "length": 17}], True),
    ],
)
async def test_group_mentions(fake, started, text, entities, expected):
    _, sink = started
    fake.inject_message(
        -100123, text, from_id=5, chat_type="supergroup", title="Friends", entities=entities
    )
    [m] = await sink.wait(1)
    assert m.chat_type == "group" and m.chat_id == "-100123" and m.chat_title == "Friends"
    assert m.mentioned is expected


async def test_mention_entity_and_text_mention(fake, started):
    _, sink = started
    # an emoji before the mention: entity offsets are UTF-16 based
    fake.inject_message(
        -5,
        "🙂 @Chela_Bot hi",
        from_id=5,
        chat_type="group",
        entities=[{"type": "mention", "offset": 3, "length": 10}],
    )
    fake.inject_message(
        -5,
        "Chela please",
        from_id=5,
        chat_type="group",
        entities=[
            {
                "type": "text_mention",
                "offset": 0,
                "length": 5,
                "user": {"id": BOT_ID, "is_bot": True, "first_name": "Chela"},
            }
        ],
    )
    fake.inject_message(
        -5,
        "Bob please",
        from_id=5,
        chat_type="group",
        entities=[
            {
                "type": "text_mention",
                "offset": 0,
                "length": 3,
                "user": {"id": 99, "is_bot": False, "first_name": "Bob"},
            }
        ],
    )
    a, b, c = await sink.wait(3)
    assert a.mentioned and b.mentioned and not c.mentioned


async def test_reply_to_bot(fake, started):
    ch, sink = started
    [bot_msg] = await ch.send(OutboundMessage(chat_id="-5", text="I am the bot"))
    fake.inject_message(
        -5, "answering you", from_id=7, chat_type="group", reply_to_message=int(bot_msg)
    )
    fake.inject_message(
        -5,
        "answering a human",
        from_id=8,
        chat_type="group",
        reply_to_message={
            "message_id": 1,
            "date": 0,
            "chat": {"id": -5, "type": "group"},
            "from": {"id": 7, "is_bot": False, "first_name": "H"},
            "text": "x",
        },
    )
    a, b = await sink.wait(2)
    assert a.reply_to_id == bot_msg and a.reply_to_bot and not a.mentioned
    assert b.reply_to_id == "1" and not b.reply_to_bot


async def test_forum_topic_thread_id(fake, started):
    _, sink = started
    topic_root = {
        "message_id": 10,
        "date": 0,
        "chat": {"id": -1001, "type": "supergroup", "is_forum": True},
        "from": {"id": 7, "is_bot": False, "first_name": "H"},
        "message_thread_id": 10,
        "forum_topic_created": {"name": "Ideas", "icon_color": 7322096},
    }
    fake.inject_message(
        -1001,
        "in a topic",
        from_id=7,
        chat_type="supergroup",
        title="Forum",
        message_thread_id=10,
        is_topic_message=True,
        reply_to_message=topic_root,
    )
    # a reply thread in a non-forum supergroup is not a topic
    fake.inject_message(
        -1002,
        "plain reply",
        from_id=7,
        chat_type="supergroup",
        message_thread_id=3,
        reply_to_message=3,
    )
    a, b = await sink.wait(2)
    assert a.thread_id == "10" and a.reply_to_id is None
    assert b.thread_id is None and b.reply_to_id == "3"


async def test_bot_sender_flag(fake, started):
    _, sink = started
    fake.inject_message(-5, "beep", from_id=31337, is_bot=True, chat_type="group")
    [m] = await sink.wait(1)
    assert m.sender_is_bot


async def test_offset_advances_only_after_sink_returns(fake, channel):
    sink = Sink()
    sink.gate = asyncio.Event()
    uid = fake.inject_message(42, "persist me", from_id=42)
    await channel.start(sink)
    await asyncio.wait_for(sink.entered.wait(), 5)
    # this wait IS about time: the loop must not poll (and so confirm) while a sink call
    # hangs, and a poll is a non-event there is no signal for; 1.5 s is longer than a poll
    await asyncio.sleep(1.5)
    assert (fake.confirmed_offset or 0) <= uid
    assert [u["update_id"] for u in fake.pending_updates] == [uid]
    sink.gate.set()
    await sink.wait(1)
    await fake.wait_for_offset(uid + 1)
    assert fake.pending_updates == []


async def test_sink_failure_redelivers_same_update(fake, channel):
    sink = Sink()
    sink.fail_times = 1
    uid = fake.inject_message(42, "retry me", from_id=42)
    uid2 = fake.inject_message(42, "after", from_id=42)
    await channel.start(sink)
    a, b = await sink.wait(2)
    assert sink.calls == 3
    assert (a.raw_id, a.text) == (str(uid), "retry me")
    assert b.raw_id == str(uid2)
    await fake.wait_for_offset(uid2 + 1)


async def test_offset_not_confirmed_when_stopped_during_failing_sink(fake, channel):
    sink = Sink()
    sink.fail_times = 10_000
    uid = fake.inject_message(42, "never stored", from_id=42)
    await channel.start(sink)
    await asyncio.wait_for(sink.entered.wait(), 5)
    await channel.stop()
    assert (fake.confirmed_offset or 0) <= uid
    assert [u["update_id"] for u in fake.pending_updates] == [uid]


async def test_stop_confirms_handled_updates(fake, started):
    ch, sink = started
    uid = fake.inject_message(42, "one", from_id=42)
    await sink.wait(1)
    await ch.stop()
    assert fake.confirmed_offset == uid + 1


async def test_malformed_updates_are_skipped(fake, started):
    _, sink = started
    bad = [
        fake.inject_raw_update({"message": "garbage"}),
        fake.inject_raw_update({"message": {"message_id": 1}}),  # no chat / date
        fake.inject_raw_update({"something_new": {"x": 1}}),  # unknown update type
        fake.inject_raw_update(
            {
                "message": {
                    "message_id": 2,
                    "date": 0,  # service message, no text
                    "chat": {"id": 1, "type": "private"},
                    "new_chat_title": "x",
                }
            }
        ),
    ]
    uid = fake.inject_message(42, "still here", from_id=42)
    [m] = await sink.wait(1)
    assert m.text == "still here"
    await fake.wait_for_offset(uid + 1)
    assert uid > max(bad)


async def test_network_error_backoff_then_recovers(fake, started):
    _, sink = started
    fake.fail_next("getUpdates", status=502, times=2)
    fake.fail_next("getUpdates", status=429, retry_after=1)
    fake.inject_message(42, "eventually", from_id=42)
    [m] = await sink.wait(1, timeout=8)
    assert m.text == "eventually"


async def test_stalled_poll_is_restarted(fake, make_channel, caplog):
    ch = make_channel(poll_timeout=1, stall_timeout=2)
    sink = Sink()
    fake.stall_next_poll(60)
    try:
        with caplog.at_level("WARNING", logger="chela.channels.telegram"):
            await ch.start(sink)
            await asyncio.sleep(0.3)
            fake.inject_message(42, "after the stall", from_id=42)
            [m] = await sink.wait(1, timeout=8)
        assert m.text == "after the stall"
        assert any("stalled" in r.getMessage() for r in caplog.records)
    finally:
        await ch.stop()


def _files_in(path: Path) -> list[Path]:
    return [p for p in path.rglob("*") if p.is_file()] if path.exists() else []


@pytest.fixture
def dest(tmp_path) -> Path:
    """The core's per-turn download directory (exists, 0700)."""
    d = tmp_path / "inbound"
    d.mkdir(mode=0o700)
    return d


async def test_inbound_photo_is_a_ref_until_fetched(fake, started, tmp_path, dest):
    ch, sink = started
    data = b"\xff\xd8\xff" + b"JPEGDATA" * 100
    fake.inject_message(42, "look", from_id=42, photo=data)
    [m] = await sink.wait(1)
    assert m.text == "look"
    [item] = m.attachments
    assert item.kind == "image" and item.mime == "image/jpeg"
    # intake: a handle only -- nothing asked of the file API, nothing on disk
    assert item.target == "" and item.ref.startswith("photo-") and item.size == len(data)
    assert fake.calls_of("getFile") == [] and fake.downloads == []
    assert _files_in(tmp_path / "media") == [] and _files_in(dest) == []

    got = await ch.fetch_media(item, dest, max_bytes=10_000)
    path = Path(got.target)
    assert got.ref == item.ref and got.name == item.name
    assert path.is_absolute() and path.parent == dest
    assert path.read_bytes() == data  # the largest size, not the thumbnail
    assert path.stat().st_mode & 0o777 == 0o600
    assert _files_in(dest) == [path]


async def test_inbound_document_and_voice(fake, started, dest):
    ch, sink = started
    fake.inject_message(
        42,
        "",
        from_id=42,
        document=b"%PDF-1.4",
        document_name="../../etc/report.pdf",
        mime_type="application/pdf",
    )
    fake.inject_message(42, "", from_id=42, voice=b"OggS....")
    a, b = await sink.wait(2)
    assert a.text == "" and a.attachments[0].kind == "document"
    assert (
        a.attachments[0].name == "../../etc/report.pdf"
        and a.attachments[0].mime == "application/pdf"
    )
    assert b.attachments[0].kind == "voice" and b.attachments[0].target == ""
    doc = await ch.fetch_media(a.attachments[0], dest, 1000)
    voice = await ch.fetch_media(b.attachments[0], dest, 1000)
    assert Path(doc.target).read_bytes() == b"%PDF-1.4"
    assert Path(doc.target).parent == dest and Path(doc.target).name.endswith("report.pdf")
    assert Path(voice.target).read_bytes() == b"OggS...."
    assert Path(voice.target).parent == dest and Path(voice.target) != Path(doc.target)


async def test_fetch_refuses_declared_size_over_cap_without_downloading(fake, started, dest):
    ch, sink = started
    fake.inject_message(42, "big", from_id=42, document=b"x" * 5000, document_name="big.bin")
    [m] = await sink.wait(1)
    [item] = m.attachments
    assert item.size == 5000
    with pytest.raises(MediaTooLarge):
        await ch.fetch_media(item, dest, max_bytes=4999)
    assert fake.calls_of("getFile") == [] and fake.downloads == []
    assert _files_in(dest) == []


@pytest.mark.parametrize("declared", [10, None], ids=["lying-size", "no-size"])
@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
async def test_fetch_counts_bytes_when_the_size_lies(fake, started, dest, declared, chunked):
    ch, sink = started
    fake.chunked_downloads = chunked
    data = b"y" * 200_000
    fake.inject_message(
        42, "", from_id=42, document=data, document_name="lies.bin", file_size=declared
    )
    [m] = await sink.wait(1)
    [item] = m.attachments
    assert item.size == (declared or 0)
    with pytest.raises(MediaTooLarge):
        await ch.fetch_media(item, dest, max_bytes=100_000)
    assert _files_in(dest) == []
    # the legitimate twin: the same lie under a cap it fits in
    got = await ch.fetch_media(item, dest, max_bytes=200_000)
    assert Path(got.target).read_bytes() == data
    assert Path(got.target).stat().st_mode & 0o777 == 0o600


async def test_fetch_failure_is_a_channel_error(fake, started, dest):
    ch, sink = started
    fake.inject_message(42, "gone", from_id=42, document=b"x", document_name="gone.bin")
    [m] = await sink.wait(1)
    assert m.text == "gone"
    fake.fail_next("getFile", status=400, description="Bad Request: invalid file_id")
    with pytest.raises(ChannelError) as err:
        await ch.fetch_media(m.attachments[0], dest, 1000)
    assert not isinstance(err.value, MediaTooLarge)
    assert fake.token not in str(err.value)
    fake.fail_next("getFile", status=400, description="Bad Request: file is too big")
    with pytest.raises(MediaTooLarge):
        await ch.fetch_media(m.attachments[0], dest, 1000)
    assert _files_in(dest) == []


async def test_fetch_media_leaves_non_ref_items_alone(started, dest):
    ch, _ = started
    item = MediaItem("image", "https://example.com/a.png")
    assert await ch.fetch_media(item, dest, 10) is item


# ---------------------------------------------------------------------------- outbound text


async def test_long_text_is_chunked_as_html(fake, started):
    ch, _ = started
    paragraphs = [("word " * 59 + "end.") for _ in range(30)]  # ~300 chars each, ~9000 total
    text = "\n\n".join(paragraphs)
    assert len(text) > 9000
    ids = await ch.send(OutboundMessage(chat_id="42", text=text))
    assert len(ids) == 3 and len(fake.sent) == 3
    for s in fake.sent:
        assert s.method == "sendMessage" and s.parse_mode == "HTML"
        assert len(s.text) <= 4096 and s.chat_id == 42
    assert ids == [str(s.message_id) for s in fake.sent]
    assert "".join(s.visible_text for s in fake.sent).replace("\n", "").replace(
        " ", ""
    ) == text.replace("\n", "").replace(" ", "")


async def test_html_refused_chunk_resent_as_plain(fake, started):
    ch, _ = started
    fake.fail_next(
        "sendMessage",
        status=400,
        description='Bad Request: can\'t parse entities: unsupported start tag "x" at byte offset 3',
    )
    ids = await ch.send(OutboundMessage(chat_id="42", text="**bold** & <things>"))
    assert len(ids) == 1
    calls = fake.calls_of("sendMessage")
    assert len(calls) == 2
    assert calls[0]["parse_mode"] == "HTML"
    assert "parse_mode" not in calls[1] and calls[1]["text"] == "**bold** & <things>"
    assert fake.sent[0].parse_mode is None


async def test_rate_limited_send_is_retried(fake, started):
    ch, _ = started
    fake.fail_next("sendMessage", status=429, retry_after=1)
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    ids = await ch.send(OutboundMessage(chat_id="42", text="hello"))
    assert loop.time() - t0 >= 0.9
    assert len(ids) == 1 and len(fake.calls_of("sendMessage")) == 2
    assert fake.sent[0].visible_text == "hello"


async def test_empty_text_sends_nothing(fake, started):
    ch, _ = started
    assert await ch.send(OutboundMessage(chat_id="42", text="  \n ")) == []
    assert fake.calls_of("sendMessage") == []


async def test_nothing_delivered_raises(fake, started):
    ch, _ = started
    fake.fail_next("sendMessage", status=403, description="Forbidden: bot was blocked by the user")
    with pytest.raises(ChannelError):
        await ch.send(OutboundMessage(chat_id="42", text="hi"))


def _long(n_chunks: int) -> str:
    return "\n\n".join(("x" * 3000) for _ in range(n_chunks))


@pytest.mark.parametrize(
    "mode, expected",
    [
        ("first", [5, None, None]),
        ("all", [5, 5, 5]),
        ("off", [5, None, None]),  # "off" with a reply id = a reply tag asked: first message only
    ],
)
async def test_reply_threading(fake, started, mode, expected):
    ch, _ = started
    fake.inject_message(42, "trigger", from_id=42)  # some earlier messages in the chat
    for _ in range(4):
        fake.inject_message(42, "x", from_id=42)
    await ch.send(OutboundMessage(chat_id="42", text=_long(3), reply_to_id="5", reply_mode=mode))
    assert [s.reply_to_message_id for s in fake.sent] == expected
    first = fake.sent[0].reply_parameters
    assert first == {"message_id": 5, "allow_sending_without_reply": True}


async def test_no_reply_without_id(fake, started):
    ch, _ = started
    await ch.send(OutboundMessage(chat_id="42", text=_long(2), reply_mode="all"))
    assert [s.reply_parameters for s in fake.sent] == [None, None]


async def test_forum_topic_send(fake, started):
    ch, _ = started
    await ch.send(
        OutboundMessage(
            chat_id="-1001",
            text="in topic",
            thread_id="10",
            media=[MediaItem("image", "https://example.com/a.png")],
        )
    )
    assert [s.message_thread_id for s in fake.sent] == [10, 10]


# ---------------------------------------------------------------------------- outbound media


async def test_media_local_and_url(fake, started, tmp_path):
    ch, _ = started
    img = tmp_path / "cat.png"
    img.write_bytes(b"\x89PNG fake image")
    doc = tmp_path / "notes.txt"
    doc.write_text("hello")
    ids = await ch.send(
        OutboundMessage(
            chat_id="42",
            text="here you go",
            media=[
                MediaItem("image", str(img)),
                MediaItem("image", "https://example.com/dog.jpg"),
                MediaItem("document", str(doc), name="my notes.txt"),
                MediaItem("video", "https://example.com/v.mp4"),
            ],
        )
    )
    assert len(ids) == 5
    kinds = [(s.method, s.filename, s.data, s.url) for s in fake.sent]
    assert kinds == [
        ("sendMessage", None, None, None),
        ("sendPhoto", "cat.png", b"\x89PNG fake image", None),
        ("sendPhoto", None, None, "https://example.com/dog.jpg"),
        ("sendDocument", "my notes.txt", b"hello", None),
        ("sendVideo", None, None, "https://example.com/v.mp4"),
    ]


async def test_refused_url_becomes_text_link(fake, started):
    ch, _ = started
    fake.reject_urls = True
    ids = await ch.send(
        OutboundMessage(
            chat_id="42",
            media=[
                MediaItem("image", "https://example.com/dog.jpg"),
                MediaItem("document", "https://example.com/a.pdf"),
            ],
        )
    )
    assert len(ids) == 2
    assert [(s.method, s.text) for s in fake.sent] == [
        ("sendMessage", "Image: https://example.com/dog.jpg"),
        ("sendMessage", "Document: https://example.com/a.pdf"),
    ]


async def test_missing_or_failing_local_file_becomes_note(fake, started, tmp_path):
    ch, _ = started
    good = tmp_path / "song.mp3"
    good.write_bytes(b"ID3 music")
    bad = tmp_path / "broken.pdf"
    bad.write_bytes(b"%PDF")
    fake.fail_next("sendDocument", status=400, description="Bad Request: file must be non-empty")
    ids = await ch.send(
        OutboundMessage(
            chat_id="42",
            media=[
                MediaItem("image", str(tmp_path / "nope.png")),
                MediaItem("document", str(bad)),
                MediaItem("audio", str(good)),
            ],
        )
    )
    assert len(ids) == 3
    assert [(s.method, s.text) for s in fake.sent] == [
        ("sendMessage", "[attachment unavailable: nope.png]"),
        ("sendMessage", "[attachment unavailable: broken.pdf]"),
        ("sendAudio", None),
    ]


async def test_audio_as_voice(fake, started, tmp_path):
    ch, _ = started
    clip = tmp_path / "clip.ogg"
    clip.write_bytes(b"OggS voice")
    await ch.send(
        OutboundMessage(
            chat_id="42",
            audio_as_voice=True,
            media=[MediaItem("audio", str(clip)), MediaItem("voice", "https://example.com/v.ogg")],
        )
    )
    assert [(s.method, s.data) for s in fake.sent] == [
        ("sendVoice", b"OggS voice"),
        ("sendVoice", None),
    ]


async def test_media_reply_threading_first(fake, started, tmp_path):
    ch, _ = started
    fake.inject_message(42, "trigger", from_id=42)
    await ch.send(
        OutboundMessage(
            chat_id="42",
            reply_to_id="1",
            reply_mode="first",
            media=[
                MediaItem("image", "https://e.com/1.png"),
                MediaItem("image", "https://e.com/2.png"),
            ],
        )
    )
    assert [s.reply_to_message_id for s in fake.sent] == [1, None]


async def test_send_before_start_raises(make_channel):
    ch = make_channel()
    with pytest.raises(ChannelError):
        await ch.send(OutboundMessage(chat_id="42", text="hi"))


# ---------------------------------------------------------------------------- typing / reactions


async def test_typing_and_react(fake, started):
    ch, _ = started
    fake.inject_message(42, "hi", from_id=42)
    await ch.typing("42")
    await ch.typing("-1001", thread_id="10")
    await ch.react("42", "1", "👀")
    await ch.react("42", "999", "👍")  # unknown message: logged, not raised
    assert fake.chat_actions == [(42, "typing", None), (-1001, "typing", 10)]
    assert fake.reactions == [(42, 1, [{"type": "emoji", "emoji": "👀"}])]


async def test_token_never_logged_or_raised(fake, started, make_channel, caplog):
    """The token is part of every Bot API URL; no log line or error text may carry it."""
    ch, _ = started
    with socket.socket() as s:  # a port that was free a moment ago: connection refused
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    down = make_channel(api_base=f"http://127.0.0.1:{port}", start_timeout=5)
    # other tests (the CLI) may have raised PTB's logger level; look at every record
    with caplog.at_level("DEBUG"), caplog.at_level("DEBUG", logger="telegram"):
        await ch.send(OutboundMessage(chat_id="42", text="hello"))
        fake.fail_next("sendMessage", 400, description="Bad Request: chat not found")
        with pytest.raises(ChannelError) as sent:
            await ch.send(OutboundMessage(chat_id="43", text="hello"))
        with pytest.raises(ChannelError) as started_err:
            await down.start(Sink())
    assert any("sendMessage" in r.getMessage() for r in caplog.records)  # the calls were logged
    texts = [r.getMessage() for r in caplog.records] + [str(sent.value), str(started_err.value)]
    texts += [str(e) for e in (sent.value.__cause__, started_err.value.__cause__) if e is not None]
    assert [t for t in texts if "SECRET" in t] == []


async def test_anonymous_admin_is_not_a_bot(fake, started):
    _, sink = started
    fake.inject_raw_update(
        {
            "message": {
                "message_id": 1,
                "date": 0,
                "text": "hi @chela_bot",
                "chat": {"id": -100, "type": "supergroup", "title": "G"},
                "from": {
                    "id": 1087968824,
                    "is_bot": True,
                    "first_name": "Group",
                    "username": "GroupAnonymousBot",
                },
                "sender_chat": {"id": -100, "type": "supergroup", "title": "G"},
            }
        }
    )
    [m] = await sink.wait(1)
    assert m.sender_id == "-100" and not m.sender_is_bot and m.mentioned


async def test_open_for_sending_neither_polls_nor_touches_the_webhook(fake, make_channel):
    ch = make_channel()
    await ch.open_for_sending()
    await ch.send(OutboundMessage(chat_id="42", text="reminder"))
    await asyncio.sleep(0.2)
    await ch.stop()
    assert [m for m, _ in fake.calls] == ["getMe", "sendMessage"]
    assert not ch.running


async def test_open_for_sending_reports_a_bad_token(fake, make_channel):
    ch = make_channel(token="999:WRONG")
    with pytest.raises(ChannelError, match="rejected"):
        await ch.open_for_sending()


# ---------------------------------------------------------------------------- preview edits


async def test_preview_is_edited_into_the_first_chunk(fake, started):
    ch, _ = started
    preview = await ch.send_preview("42", "Hel")
    await ch.edit_preview("42", preview, "Hello")
    await ch.edit_preview("42", preview, "Hello")  # "not modified": already shows this
    text = "**Hello** world\n\n" + "y" * 3990
    ids = await ch.send(OutboundMessage(chat_id="42", text=text, edit_id=preview))
    assert ids[0] == preview and len(ids) == 2
    first = fake.sent[0]
    assert first.edits == ["Hello", "<b>Hello</b> world"]
    assert [s.method for s in fake.sent] == ["sendMessage", "sendMessage"]
    assert fake.calls_of("deleteMessage") == []


async def test_preview_edit_with_refused_html_goes_plain(fake, started):
    ch, _ = started
    preview = await ch.send_preview("42", "…")
    fake.fail_next(
        "editMessageText", 400, description="Bad Request: can't parse entities: unclosed start tag"
    )
    ids = await ch.send(OutboundMessage(chat_id="42", text="**done**", edit_id=preview))
    assert ids == [preview]
    edits = fake.calls_of("editMessageText")
    assert edits[0]["parse_mode"] == "HTML" and "parse_mode" not in edits[1]
    assert fake.sent[0].edits == ["**done**"]


async def test_preview_gone_is_deleted_and_the_reply_sent_anew(fake, started):
    ch, _ = started
    fake.inject_message(42, "question", from_id=42)
    preview = await ch.send_preview("42", "…")
    fake.fail_next("editMessageText", 400, description="Bad Request: message can't be edited")
    ids = await ch.send(
        OutboundMessage(chat_id="42", text="**done**", edit_id=preview, reply_to_id="1")
    )
    assert ids != [preview] and len(ids) == 1
    assert [c["message_id"] for c in fake.calls_of("deleteMessage")] == [int(preview)]
    last = fake.sent[-1]
    assert str(last.message_id) == ids[0] and last.parse_mode == "HTML"
    assert last.visible_text == "done" and last.reply_to_message_id == 1


async def test_reply_moves_to_the_next_chunk_when_the_first_fails(fake, started):
    ch, _ = started
    fake.inject_message(42, "question", from_id=42)
    fake.fail_next("sendMessage", 400, description="Bad Request: something else")
    ids = await ch.send(OutboundMessage(chat_id="42", text=_long(2), reply_to_id="1"))
    assert len(ids) == 1
    assert [s.reply_to_message_id for s in fake.sent] == [1]


async def test_upload_bytes_and_name_reach_the_server(fake, started, tmp_path):
    ch, _ = started
    clip = tmp_path / "a b.mp4"
    clip.write_bytes(b"\x00\x01video")
    [mid] = await ch.send(
        OutboundMessage(chat_id="42", media=[MediaItem("video", str(clip))], thread_id="4")
    )
    [s] = fake.sent
    assert (s.method, s.filename, s.data, s.message_thread_id) == (
        "sendVideo",
        "a b.mp4",
        b"\x00\x01video",
        4,
    )
    assert str(s.message_id) == mid
