"""SignalChannel against a wire-level fake signal-cli HTTP daemon."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from channels.base import ChannelError, MediaItem, MediaTooLarge, OutboundMessage
from channels.signal import SignalChannel
from channels.signal.rpc import RpcClient, RpcError, find_retry_after
from channels.signal.sse import SSEParser
from channels.signal.inbound import _utf16_to_index
from tests.fakes.signal import FakeSignalCli
from tests.fakes.sink import Sink

BOT = "+15550000000"
ALICE = "+15550001111"
BOB = "+15550002222"
GROUP = "Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MGFiY2RlZmdoaWo="


# ---------------------------------------------------------------- fixtures


@pytest.fixture
async def fake():
    f = await FakeSignalCli(account=BOT, keepalive=0.2).start()
    yield f
    await f.stop()


def make_channel(fake: FakeSignalCli, tmp_path: Path, **kw) -> SignalChannel:
    opts = dict(
        account=BOT,
        http_url=fake.url,
        account_name="main",
        media_dir=tmp_path / "media",
        attachments_dir=str(fake.attachments_dir),
        reconnect_initial=0.02,
        reconnect_max=0.1,
        rpc_retry_delay=0.01,
        idle_timeout=2.0,
    )
    opts.update(kw)
    return SignalChannel(**opts)


@pytest.fixture
async def chan(fake, tmp_path):
    sink = Sink()
    ch = make_channel(fake, tmp_path)
    await ch.start(sink)
    ch.test_sink = sink
    yield ch
    await ch.stop()


# ---------------------------------------------------------------- inbound


async def test_direct_message_fields(fake, chan):
    env = fake.inject_message(ALICE, "hello there", source_name="Alice")
    [msg] = await chan.test_sink.wait(1)
    assert msg.channel == "signal"
    assert msg.chat_type == "direct"
    assert msg.chat_id == ALICE
    assert msg.sender_id == ALICE
    assert msg.sender_name == "Alice"
    assert msg.text == "hello there"
    assert msg.message_id == str(env["timestamp"])
    assert msg.account == "main"
    assert msg.raw_id == f"{ALICE}:{env['timestamp']}"
    assert msg.timestamp == pytest.approx(env["timestamp"] / 1000)
    assert msg.mentioned is False and msg.reply_to_id is None
    assert fake.events_requests[0]["query"] == {"account": BOT}
    assert fake.check_calls == 1


async def test_direct_message_without_number_uses_uuid(fake, chan):
    uid = "0b4c5e9a-1111-4222-8333-444455556666"
    fake.inject_message(uid, "hidden number")
    [msg] = await chan.test_sink.wait(1)
    assert msg.chat_id == uid and msg.sender_id == uid and msg.chat_type == "direct"


async def test_group_message_with_bot_mention(fake, chan):
    fake.inject_message(ALICE, "\ufffc what's up", group_id=GROUP, group_name="Fam", mentions=[BOT])
    [msg] = await chan.test_sink.wait(1)
    assert msg.chat_type == "group" and msg.group_kind == "group"
    assert msg.chat_id == GROUP
    assert msg.chat_title == "Fam"
    assert msg.sender_id == ALICE
    assert msg.mentioned is True
    assert "\ufffc" not in msg.text
    assert msg.text == f"@{BOT} what's up"


async def test_group_message_mention_by_uuid_only(fake, chan):
    chan.account_uuid = fake.account_uuid
    mention = {"name": "Chela", "number": None, "uuid": fake.account_uuid, "start": 3, "length": 1}
    fake.inject_message(ALICE, "hi \ufffc!", group_id=GROUP, mentions=[mention])
    [msg] = await chan.test_sink.wait(1)
    assert msg.mentioned is True
    assert msg.text == "hi @Chela!"


async def test_group_message_without_bot_mention(fake, chan):
    fake.inject_message(ALICE, "😀 ping \ufffc", group_id=GROUP, group_name="Fam", mentions=[BOB])
    [msg] = await chan.test_sink.wait(1)
    assert msg.mentioned is False
    assert msg.chat_id == GROUP
    # UTF-16 offsets: the emoji counts twice, the placeholder is still replaced correctly
    assert msg.text == f"😀 ping @{BOB}"


async def test_quote_of_bot_message_sets_reply_to_bot(fake, chan):
    ids = await chan.send(OutboundMessage(chat_id=GROUP, text="I am the bot"))
    fake.inject_message(
        ALICE,
        "replying",
        group_id=GROUP,
        quote={"id": int(ids[0]), "author": BOT, "text": "I am the bot"},
    )
    fake.inject_message(
        ALICE, "other", group_id=GROUP, quote={"id": 123, "author": BOB, "text": "x"}
    )
    first, second = await chan.test_sink.wait(2)
    assert first.reply_to_id == ids[0] and first.reply_to_bot is True
    assert second.reply_to_id == "123" and second.reply_to_bot is False


async def test_ignores_receipts_typing_sync_reactions_and_own_messages(fake, chan):
    base = {"source": ALICE, "sourceNumber": ALICE, "sourceUuid": "u", "sourceDevice": 1}
    fake.push_envelope(
        dict(base, timestamp=1, receiptMessage={"when": 1, "isDelivery": True, "timestamps": [5]})
    )
    fake.push_envelope(dict(base, timestamp=2, typingMessage={"action": "STARTED", "timestamp": 2}))
    fake.push_envelope(
        dict(base, timestamp=3, syncMessage={"sentMessage": {"message": "x", "timestamp": 3}})
    )
    fake.push_envelope(
        dict(
            base,
            timestamp=4,
            dataMessage={
                "timestamp": 4,
                "reaction": {"emoji": "👍", "targetAuthor": BOT, "targetSentTimestamp": 9},
            },
        )
    )
    fake.push_envelope(
        dict(
            base,
            source=BOT,
            sourceNumber=BOT,
            timestamp=5,
            dataMessage={"timestamp": 5, "message": "me"},
        )
    )
    fake.push_envelope(
        dict(base, timestamp=6, dataMessage={"timestamp": 6, "message": "hi"}),
        account="+19999999999",
    )
    fake.push_raw("not json")
    fake.inject_message(ALICE, "real one")
    msgs = await chan.test_sink.wait(1)
    await asyncio.sleep(0.05)
    assert [m.text for m in msgs] == ["real one"]


def _files_in(path: Path) -> list[Path]:
    return [p for p in path.rglob("*") if p.is_file()] if path.exists() else []


@pytest.fixture
def dest(tmp_path) -> Path:
    """The core's per-turn download directory (exists, 0700)."""
    d = tmp_path / "inbound"
    d.mkdir(mode=0o700)
    return d


async def test_inbound_attachment_is_a_ref_until_fetched(fake, chan, tmp_path, dest):
    fake.inject_message(
        ALICE,
        "look",
        attachments=[
            {"content": b"\x89PNGdata", "filename": "cat.png", "contentType": "image/png"}
        ],
    )
    [msg] = await chan.test_sink.wait(1)
    [item] = msg.attachments
    assert item.kind == "image" and item.name == "cat.png" and item.mime == "image/png"
    # intake: signal-cli's id only -- nothing copied
    assert item.target == "" and (fake.attachments_dir / item.ref).is_file() and item.size == 8
    assert _files_in(tmp_path / "media") == [] and _files_in(dest) == []

    got = await chan.fetch_media(item, dest, max_bytes=100)
    path = Path(got.target)
    assert path.is_absolute() and path.parent == dest and path.name.endswith("cat.png")
    assert path.read_bytes() == b"\x89PNGdata" and path.stat().st_mode & 0o777 == 0o600
    assert (fake.attachments_dir / item.ref).is_file()  # signal-cli's copy is left alone


async def test_inbound_stored_filename_is_the_ref(fake, chan, dest):
    att = fake.write_attachment(b"%PDF", filename="doc.pdf", content_type="application/pdf")
    att["storedFilename"] = str(fake.attachments_dir / att["id"])
    fake.inject_message(ALICE, "", attachments=[att])
    [msg] = await chan.test_sink.wait(1)
    [item] = msg.attachments
    assert item.ref == att["storedFilename"] and item.target == ""
    got = await chan.fetch_media(item, dest, 100)
    assert Path(got.target).read_bytes() == b"%PDF"


async def test_fetch_refuses_declared_size_over_cap(fake, chan, dest):
    fake.inject_message(ALICE, "big", attachments=[{"content": b"x" * 5000, "filename": "big.bin"}])
    [msg] = await chan.test_sink.wait(1)
    with pytest.raises(MediaTooLarge):
        await chan.fetch_media(msg.attachments[0], dest, max_bytes=4999)
    assert _files_in(dest) == []


@pytest.mark.parametrize("declared", [10, None], ids=["lying-size", "no-size"])
async def test_fetch_counts_bytes_when_the_size_lies(fake, chan, dest, declared):
    att = fake.write_attachment(b"y" * 200_000, filename="lies.bin")
    if declared is None:
        del att["size"]
    else:
        att["size"] = declared
    fake.inject_message(ALICE, "", attachments=[att])
    [msg] = await chan.test_sink.wait(1)
    [item] = msg.attachments
    assert item.size == (declared or 0)
    with pytest.raises(MediaTooLarge):
        await chan.fetch_media(item, dest, max_bytes=100_000)
    assert _files_in(dest) == []
    got = await chan.fetch_media(item, dest, max_bytes=200_000)  # the legitimate twin
    assert Path(got.target).read_bytes() == b"y" * 200_000


async def test_fetch_does_not_follow_symlinks_or_escape(fake, chan, dest, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_bytes(b"top secret")
    (fake.attachments_dir / "link.txt").symlink_to(secret)
    for ref in ("link.txt", str(fake.attachments_dir / "link.txt"), "../secret.txt", "nope.pdf"):
        item = MediaItem("document", "", name="x.txt", ref=ref)
        with pytest.raises(ChannelError) as err:
            await chan.fetch_media(item, dest, 100)
        assert not isinstance(err.value, MediaTooLarge)
    assert _files_in(dest) == []


async def test_inbound_missing_attachment_fails_at_fetch(fake, chan, dest):
    att = {"contentType": "application/pdf", "filename": "doc.pdf", "id": "nope.pdf", "size": 3}
    fake.inject_message(ALICE, "", attachments=[att])
    [msg] = await chan.test_sink.wait(1)
    [item] = msg.attachments  # intake does not look at the disk
    assert item.ref == "nope.pdf" and msg.text == ""
    with pytest.raises(ChannelError, match="not found"):
        await chan.fetch_media(item, dest, 100)


async def test_duplicate_envelope_delivered_once(fake, chan):
    env = fake.inject_message(ALICE, "once")
    fake.push_envelope(env)
    fake.inject_message(ALICE, "after")
    msgs = await chan.test_sink.wait(2)
    await asyncio.sleep(0.05)
    assert [m.text for m in msgs] == ["once", "after"]


async def test_reconnect_after_drop_delivers_each_message_once(fake, chan):
    fake.inject_message(ALICE, "first")
    await chan.test_sink.wait(1)
    fake.drop_streams()
    fake.inject_message(ALICE, "second")  # nobody connected: queued by the daemon
    await fake.wait_for_clients(1)
    await chan.test_sink.wait(2)
    fake.inject_message(ALICE, "third")
    msgs = await chan.test_sink.wait(3)
    await asyncio.sleep(0.05)
    assert [m.text for m in msgs] == ["first", "second", "third"]
    assert chan.connects >= 2
    assert fake.events_requests[-1]["last_event_id"] is not None


async def test_replay_of_all_events_after_daemon_restart_not_answered_twice(fake, chan):
    fake.inject_message(ALICE, "one")
    fake.inject_message(BOB, "two")
    await chan.test_sink.wait(2)
    fake.restart_event_ids()  # Last-Event-ID becomes unknown → full replay
    fake.drop_streams()
    await fake.wait_for_clients(1)
    fake.inject_message(ALICE, "three")
    msgs = await chan.test_sink.wait(3)
    await asyncio.sleep(0.05)
    assert [m.text for m in msgs] == ["one", "two", "three"]


async def test_reconnect_keeps_retrying_while_daemon_down(fake, tmp_path):
    sink = Sink()
    ch = make_channel(fake, tmp_path)
    await ch.start(sink)
    try:
        port = int(fake.url.rsplit(":", 1)[1])
        # stop the fake entirely, then bring up a new one on the same port
        await fake.stop()
        await asyncio.sleep(0.2)
        fake2 = FakeSignalCli(account=BOT, keepalive=0.2)
        from aiohttp import web

        app = web.Application()
        app.router.add_post("/api/v1/rpc", fake2._rpc)
        app.router.add_get("/api/v1/events", fake2._events)
        app.router.add_get("/api/v1/check", fake2._check)
        runner = web.AppRunner(app, shutdown_timeout=0.5)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        try:
            await fake2.wait_for_clients(1)
            fake2.inject_message(ALICE, "back")
            [msg] = await sink.wait(1)
            assert msg.text == "back"
        finally:
            fake2.drop_streams()
            await runner.cleanup()
    finally:
        await ch.stop()


async def test_stalled_stream_is_restarted(tmp_path):
    fake = await FakeSignalCli(account=BOT, keepalive=30).start()  # no keep-alives
    sink = Sink()
    ch = make_channel(fake, tmp_path, idle_timeout=0.2)
    try:
        await ch.start(sink)
        await asyncio.sleep(0.5)
        assert ch.connects >= 2
        fake.inject_message(ALICE, "still here")
        await sink.wait(1)
    finally:
        await ch.stop()
        await fake.stop()


# ---------------------------------------------------------------- start / stop


async def test_daemon_unreachable_raises_clear_error(tmp_path, unused_tcp_port):
    ch = SignalChannel(
        account=BOT, http_url=f"http://127.0.0.1:{unused_tcp_port}", media_dir=tmp_path
    )
    with pytest.raises(ChannelError) as info:
        await ch.start(Sink())
    text = str(info.value)
    assert "signal-cli daemon not reachable" in text
    assert f"signal-cli -a {BOT} daemon --http 127.0.0.1:{unused_tcp_port}" in text
    await ch.stop()


async def test_wrong_account_rejected_at_start(fake, tmp_path):
    ch = make_channel(fake, tmp_path, account="+19990000000")
    with pytest.raises(ChannelError, match="HTTP 400"):
        await ch.start(Sink())
    await ch.stop()


async def test_stop_is_idempotent(fake, tmp_path):
    ch = make_channel(fake, tmp_path)
    await ch.stop()
    await ch.start(Sink())
    await fake.wait_for_clients(1)
    await ch.stop()
    await ch.stop()
    # the fake notices the closed connection on its next keep-alive write
    await fake._wait(lambda: fake.connected_clients == 0, 2.0, "SSE client to go away")


# ---------------------------------------------------------------- outbound


async def test_send_direct_returns_timestamps(fake, chan):
    ids = await chan.send(OutboundMessage(chat_id=ALICE, text="**hi** there"))
    [sent] = fake.sent
    assert sent["recipient"] == [ALICE]
    assert "groupId" not in sent
    assert sent["account"] == BOT
    assert sent["message"] == "hi there"
    assert sent["textStyle"] == ["0:2:BOLD"]
    assert ids == [str(sent["timestamp"])]


async def test_send_markdown_as_text_styles(fake, chan):
    """Offsets are UTF-16 code units: the emoji before the code span counts twice."""
    await chan.send(
        OutboundMessage(
            chat_id=ALICE, text="# Plan\n\n🎉 run `make test`, then *check* ~~nothing~~"
        )
    )
    [sent] = fake.sent
    assert sent["message"] == "Plan\n\n🎉 run make test, then check nothing"
    assert sorted(sent["textStyle"]) == sorted(
        ["0:4:BOLD", "13:9:MONOSPACE", "29:5:ITALIC", "35:7:STRIKETHROUGH"]
    )


async def test_old_signal_cli_without_text_styles_gets_plain_text(fake, chan, caplog):
    fake.text_styles = False
    with caplog.at_level(
        "WARNING", logger="channels.signal"
    ):  # a CLI test may have raised root's level
        await chan.send(OutboundMessage(chat_id=ALICE, text="**one**"))
        await chan.send(OutboundMessage(chat_id=ALICE, text="**two**"))
    assert [s["message"] for s in fake.sent] == ["one", "two"]
    assert all("textStyle" not in s for s in fake.sent)
    styled = [p for m, p in fake.rpc_calls if m == "send" and "textStyle" in p]
    assert len(styled) == 2  # the first send only (tried twice), never again
    assert any("refused text styles" in r.getMessage() for r in caplog.records)


async def test_send_long_text_is_chunked(fake, chan):
    text = "\n\n".join(("word " * 150).strip() for _ in range(30))  # ~22k chars
    ids = await chan.send(OutboundMessage(chat_id=ALICE, text=text))
    assert len(fake.sent) >= 5
    assert len(ids) == len(fake.sent)
    assert all(len(s["message"]) <= 4000 for s in fake.sent)
    assert sum(s["message"].count("word") for s in fake.sent) == 150 * 30


async def test_group_send_uses_group_id(fake, chan):
    fake.inject_message(ALICE, "hi", group_id=GROUP)
    await chan.test_sink.wait(1)
    await chan.send(OutboundMessage(chat_id=GROUP, text="hello group"))
    [sent] = fake.sent
    assert sent["groupId"] == GROUP and "recipient" not in sent


async def test_send_target_by_shape_without_history(fake, chan):
    await chan.send(OutboundMessage(chat_id="+15557776666", text="a"))
    await chan.send(OutboundMessage(chat_id="0b4c5e9a-1111-4222-8333-444455556666", text="b"))
    await chan.send(
        OutboundMessage(chat_id="+Zm9vYmFy/YmF6cXV4MTIzNDU2Nzg5MGFiY2RlZmdoaWo=", text="c")
    )
    await chan.send(OutboundMessage(chat_id="group:" + GROUP, text="d"))
    a, b, c, d = fake.sent
    assert a["recipient"] == ["+15557776666"]
    assert b["recipient"] == ["0b4c5e9a-1111-4222-8333-444455556666"]
    assert c["groupId"].startswith("+Zm9v")
    assert d["groupId"] == GROUP


async def test_reply_quote_first_chunk_only(fake, chan):
    env = fake.inject_message(ALICE, "question?", group_id=GROUP)
    [msg] = await chan.test_sink.wait(1)
    text = "\n\n".join(("word " * 150).strip() for _ in range(12))
    await chan.send(
        OutboundMessage(chat_id=GROUP, text=text, reply_to_id=msg.message_id, reply_mode="first")
    )
    assert len(fake.sent) >= 2
    first = fake.sent[0]
    assert first["quoteTimestamp"] == env["timestamp"]
    assert first["quoteAuthor"] == ALICE
    assert first["quoteMessage"] == "question?"
    assert all("quoteTimestamp" not in s for s in fake.sent[1:])


async def test_reply_quote_all_chunks(fake, chan):
    env = fake.inject_message(ALICE, "q")
    [msg] = await chan.test_sink.wait(1)
    text = "\n\n".join(("word " * 150).strip() for _ in range(12))
    await chan.send(
        OutboundMessage(chat_id=ALICE, text=text, reply_to_id=msg.message_id, reply_mode="all")
    )
    assert len(fake.sent) >= 2
    assert all(
        s["quoteTimestamp"] == env["timestamp"] and s["quoteAuthor"] == ALICE for s in fake.sent
    )


async def test_reply_to_own_message_quotes_bot(fake, chan):
    [mid] = await chan.send(OutboundMessage(chat_id=ALICE, text="mine"))
    await chan.send(OutboundMessage(chat_id=ALICE, text="follow-up", reply_to_id=mid))
    assert fake.sent[1]["quoteAuthor"] == BOT and fake.sent[1]["quoteTimestamp"] == int(mid)


async def test_send_local_attachment_and_url(fake, chan, tmp_path):
    img = tmp_path / "chart.png"
    img.write_bytes(b"png")
    media = [
        MediaItem(kind="image", target=str(img), name="chart.png"),
        MediaItem(kind="document", target="https://example.invalid/report.pdf"),
        MediaItem(kind="image", target=str(tmp_path / "missing.png"), name="missing.png"),
    ]
    ids = await chan.send(OutboundMessage(chat_id=ALICE, text="here you go", media=media))
    [sent] = fake.sent
    assert sent["attachments"] == [str(img)]
    assert sent["message"].startswith("here you go")
    assert "File: https://example.invalid/report.pdf" in sent["message"]
    assert "[attachment unavailable: missing.png]" in sent["message"]
    assert len(ids) == 1


async def test_send_attachment_only(fake, chan, tmp_path):
    f = tmp_path / "a.txt"
    f.write_text("x")
    ids = await chan.send(
        OutboundMessage(chat_id=ALICE, media=[MediaItem(kind="document", target=str(f))])
    )
    [sent] = fake.sent
    assert sent["attachments"] == [str(f)] and "message" not in sent
    assert ids == [str(sent["timestamp"])]


async def test_send_empty_sends_nothing(fake, chan):
    assert await chan.send(OutboundMessage(chat_id=ALICE, text="   ")) == []
    assert fake.rpc_calls == []


async def test_send_retries_once_then_succeeds(fake, chan):
    fake.fail_rpc_next(status=500)
    ids = await chan.send(OutboundMessage(chat_id=ALICE, text="retry me"))
    assert len(ids) == 1
    assert [m for m, _ in fake.rpc_calls] == ["send", "send"]


async def test_send_jsonrpc_error_twice_raises(fake, chan):
    fake.fail_rpc_next(error={"code": -1, "message": "Unregistered user"}, times=2)
    with pytest.raises(ChannelError, match="Unregistered user"):
        await chan.send(OutboundMessage(chat_id=ALICE, text="nope"))
    assert len(fake.calls("send")) == 2


async def test_typing_params(fake, chan):
    await chan.typing(ALICE)
    fake.inject_message(ALICE, "x", group_id=GROUP)
    await chan.test_sink.wait(1)
    await chan.typing(GROUP)
    direct, group = fake.calls("sendTyping")
    assert direct["recipient"] == [ALICE] and "groupId" not in direct
    assert group["groupId"] == GROUP and "recipient" not in group


async def test_typing_failure_is_swallowed(fake, chan):
    fake.fail_rpc_next(status=500)
    await chan.typing(ALICE)


async def test_reaction_params(fake, chan):
    env = fake.inject_message(BOB, "nice", group_id=GROUP)
    [msg] = await chan.test_sink.wait(1)
    await chan.react(GROUP, msg.message_id, "👍")
    [params] = fake.calls("sendReaction")
    assert params["groupId"] == GROUP
    assert params["emoji"] == "👍"
    assert params["targetAuthor"] == BOB
    assert params["targetTimestamp"] == env["timestamp"]


async def test_reaction_unknown_group_message_raises(fake, chan):
    with pytest.raises(ChannelError):
        await chan.react("group:" + GROUP, "12345", "👍")


async def test_capabilities(chan):
    assert chan.name == "signal"
    assert chan.capabilities.names() == ["media", "reactions", "typing"]
    assert chan.capabilities.max_text == 4000


# ---------------------------------------------------------------- SSE parser (pure)


def test_sse_parser_multiline_comments_and_split_chunks():
    p = SSEParser()
    raw = b': keep-alive\r\nid: 7\r\nevent: receive\r\ndata: {"a":\r\ndata:  1}\r\n\r\n:\n\ndata:x\rdata:y\r\r'
    events = []
    for i in range(len(raw)):  # feed one byte at a time
        events.extend(p.feed(raw[i : i + 1]))
    assert [(e.event, e.data, e.id) for e in events] == [
        ("receive", '{"a":\n 1}', "7"),
        ("message", "x\ny", "7"),
    ]


def test_sse_parser_ignores_incomplete_and_empty_events():
    p = SSEParser()
    assert p.feed(b"event: ping\n\nretry: 10\n\ndata: partial") == []
    assert p.retry_ms == 10
    [ev] = p.feed(" é\n\n".encode())
    assert ev.data == "partial é" and ev.event == "message"


def test_utf16_offsets():
    assert _utf16_to_index("😀a\ufffc", 3) == 2
    assert _utf16_to_index("ab", 5) == 2


async def test_malformed_envelope_does_not_kill_stream(fake, chan):
    fake.push_envelope(
        {
            "source": ALICE,
            "sourceNumber": ALICE,
            "timestamp": "garbage",
            "dataMessage": {"timestamp": "garbage", "message": "x"},
        }
    )
    fake.inject_message(ALICE, "fine")
    msgs = await chan.test_sink.wait(1)
    await asyncio.sleep(0.05)
    assert [m.text for m in msgs] == ["fine"]
    assert chan.connects == 1


async def test_open_for_sending_never_opens_the_event_stream(fake, tmp_path):
    ch = make_channel(fake, tmp_path)
    await ch.open_for_sending()
    try:
        ids = await ch.send(OutboundMessage(chat_id=ALICE, text="reminder"))
    finally:
        await ch.stop()
    assert len(ids) == 1 and fake.sent[0]["message"] == "reminder"
    assert fake.events_requests == []


async def test_open_for_sending_reports_an_unreachable_daemon(tmp_path):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ch = SignalChannel(account=BOT, http_url=f"http://127.0.0.1:{port}", media_dir=tmp_path)
    with pytest.raises(ChannelError, match="not reachable"):
        await ch.open_for_sending()
    await ch.stop()


# ---------------------------------------------------------------- JSON-RPC client (rpc.py)


@pytest.fixture
async def rpc_server():
    """A bare HTTP server on 127.0.0.1 answering /api/v1/rpc from a script of responses."""
    from aiohttp import web

    script: list = []
    bodies: list[dict] = []

    async def handler(request: web.Request) -> web.Response:
        bodies.append(await request.json())
        status, headers, body = script.pop(0)
        return web.json_response(body, status=status, headers=headers)

    app = web.Application()
    app.router.add_post("/api/v1/rpc", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    host, port = runner.addresses[0][:2]
    yield f"http://{host}:{port}", script, bodies
    await runner.cleanup()


async def test_rpc_rate_limits_carry_their_wait(rpc_server):
    url, script, bodies = rpc_server
    client = RpcClient(url, account=BOT, retry_delay=0.01, max_retry_after=0.02)
    limited = {
        "code": -5,
        "message": "rate limited",
        "data": {"response": {"results": [{"retryAfterSeconds": 3}]}},
    }
    script += [
        (429, {"Retry-After": "7"}, {"error": "slow down"}),
        (200, {}, {"jsonrpc": "2.0", "id": "x", "error": limited}),
        (200, {}, {"jsonrpc": "2.0", "id": "x", "error": {"code": -1, "message": "no"}}),
        (500, {}, {}),
        (200, {}, {"jsonrpc": "2.0", "id": "x", "result": {"timestamp": 5}}),
    ]
    try:
        with pytest.raises(RpcError) as http_limited:
            await client.call_once("send", {"recipient": [ALICE]})
        with pytest.raises(RpcError) as rpc_limited:
            await client.call_once("send", {"recipient": [ALICE]})
        with pytest.raises(RpcError) as refused:
            await client.call_once("version", {})
        # the twin: a failure then an answer is one successful call (capped wait)
        assert await client.call("send", {"recipient": [ALICE]}) == {"timestamp": 5}
    finally:
        await client.close()
    assert (http_limited.value.code, http_limited.value.retry_after) == (None, 7.0)
    assert (rpc_limited.value.code, rpc_limited.value.retry_after) == (-5, 3.0)
    assert (refused.value.code, refused.value.retry_after) == (-1, None)
    assert [b["params"].get("account") for b in bodies] == [BOT, BOT, None, BOT, BOT]
    assert len({b["id"] for b in bodies}) == 5 and {b["jsonrpc"] for b in bodies} == {"2.0"}


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"retryAfterSeconds": 4}, 4.0),
        ({"a": [{"b": {"retry_after": 2.5}}]}, 2.5),
        ({"retryAfterSeconds": -1}, None),
        ({"retryAfterSeconds": "9"}, None),
        ({"a": {"b": {"c": {"d": {"e": {"retryAfter": 1}}}}}}, None),  # deeper than it looks
        (None, None),
    ],
)
def test_find_retry_after(data, expected):
    assert find_retry_after(data) == expected
