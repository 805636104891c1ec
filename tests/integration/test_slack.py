"""Slack adapter against a wire-level fake: real slack-bolt / slack-sdk code paths."""

from __future__ import annotations

import asyncio
import time

import pytest

from channels.base import ChannelError, MediaItem, MediaTooLarge, OutboundMessage
from channels.slack import SlackChannel, slack_emoji_name
from tests.fakes.slack import FakeSlack, post_http_event
from tests.fakes.sink import Sink

SECRET = "shh-signing-secret"


@pytest.fixture
async def fake():
    async with FakeSlack() as f:
        yield f


@pytest.fixture
async def socket_channel(fake, tmp_path):
    sink = Sink()
    ch = SlackChannel(
        bot_token=fake.bot_token,
        app_token=fake.app_token,
        api_base=fake.api_base,
        media_dir=tmp_path / "media",
    )
    await ch.start(sink)
    await fake.wait_for_socket()
    yield ch, sink
    await ch.stop()


@pytest.fixture
async def http_channel(fake):
    sink = Sink()
    ch = SlackChannel(
        mode="http",
        bot_token=fake.bot_token,
        signing_secret=SECRET,
        api_base=fake.api_base,
        listen="127.0.0.1:0",
    )
    await ch.start(sink)
    yield ch, sink
    await ch.stop()


# ------------------------------------------------------------------ start / identity


async def test_start_learns_identity_and_capabilities(socket_channel, fake):
    ch, _ = socket_channel
    assert ch.bot_identity["id"] == "UBOT"
    assert ch.bot_identity["username"] == "chela"
    assert ch.bot_identity["bot_id"] == "BBOT"
    assert ch.capabilities.names() == ["media", "reactions", "threads"]
    assert ch.capabilities.max_text == 4000
    assert ("apps.connections.open", {}) in fake.calls


async def test_bad_bot_token_raises_channel_error(fake):
    ch = SlackChannel(bot_token="xoxb-wrong", app_token=fake.app_token, api_base=fake.api_base)
    with pytest.raises(ChannelError, match="invalid_auth"):
        await ch.start(Sink())
    await ch.stop()


async def test_bad_app_token_raises_channel_error(fake):
    ch = SlackChannel(bot_token=fake.bot_token, app_token="xapp-wrong", api_base=fake.api_base)
    with pytest.raises(ChannelError, match="app token"):
        await ch.start(Sink())
    await ch.stop()


async def test_missing_secrets_raise(fake):
    with pytest.raises(ChannelError, match="app-level token"):
        await SlackChannel(bot_token=fake.bot_token, api_base=fake.api_base).start(Sink())
    with pytest.raises(ChannelError, match="signing secret"):
        await SlackChannel(mode="http", bot_token=fake.bot_token, api_base=fake.api_base).start(
            Sink()
        )


async def test_unreachable_api_raises(unused_tcp_port):
    ch = SlackChannel(
        bot_token="xoxb", app_token="xapp", api_base=f"http://127.0.0.1:{unused_tcp_port}/api"
    )
    with pytest.raises(ChannelError, match="cannot reach"):
        await ch.start(Sink())


async def test_stop_is_idempotent(fake):
    ch = SlackChannel(bot_token=fake.bot_token, app_token=fake.app_token, api_base=fake.api_base)
    await ch.start(Sink())
    await ch.stop()
    await ch.stop()


# ------------------------------------------------------------------ inbound, Socket Mode


async def test_dm_message_becomes_direct_inbound_and_is_acked(socket_channel, fake):
    _ch, sink = socket_channel
    ev = fake.message_event("D123", "U1", "hello &amp; <@UBOT> hi", ts="1700000000.000100")
    env = await fake.push_event(ev, event_id="Ev1")
    await fake.wait_for_ack(env)
    [m] = await sink.wait(1)
    assert m.channel == "slack" and m.chat_id == "D123" and m.chat_type == "direct"
    assert m.sender_id == "U1" and m.message_id == "1700000000.000100"
    assert m.text == "hello & @chela hi"
    assert m.group_kind == "channel" and m.thread_id is None
    assert m.mentioned is True and m.sender_is_bot is False
    assert m.raw_id == "D123:1700000000.000100"
    assert m.timestamp == pytest.approx(1700000000.0001)


async def test_ack_only_after_sink_returned(fake):
    sink = Sink()
    sink.gate = asyncio.Event()  # the daemon is still storing the message
    ch = SlackChannel(bot_token=fake.bot_token, app_token=fake.app_token, api_base=fake.api_base)
    await ch.start(sink)
    try:
        env = await fake.push_event(fake.message_event("D1", "U1", "slow"))
        await asyncio.wait_for(sink.entered.wait(), 5)
        assert env not in fake.acks and not sink.messages
        sink.gate.set()
        await fake.wait_for_ack(env)
        assert len(sink.messages) == 1
    finally:
        await ch.stop()


async def test_sink_failure_means_no_ack_and_redelivery_works(fake):
    sink = Sink(fail_times=1)
    ch = SlackChannel(bot_token=fake.bot_token, app_token=fake.app_token, api_base=fake.api_base)
    await ch.start(sink)
    try:
        ev = fake.message_event("D1", "U1", "persist me")
        env = await fake.push_event(ev, event_id="EvA")
        await asyncio.sleep(0.3)
        assert env not in fake.acks and not sink.messages
        env2 = await fake.push_event(ev, event_id="EvA", retry_attempt=1)  # Slack redelivers
        await fake.wait_for_ack(env2)
        assert [m.text for m in sink.messages] == ["persist me"]
    finally:
        await ch.stop()


async def test_channel_message_without_mention(socket_channel, fake):
    _, sink = socket_channel
    env = await fake.push_event(
        fake.message_event("C9", "U2", "just chatting", channel_type="channel")
    )
    await fake.wait_for_ack(env)
    [m] = await sink.wait(1)
    assert m.chat_type == "group" and m.chat_id == "C9" and m.mentioned is False


async def test_app_mention_and_message_for_same_ts_give_one_inbound(socket_channel, fake):
    _, sink = socket_channel
    ts = fake.new_ts()
    text = "<@UBOT> what's up"
    e1 = await fake.push_event(fake.app_mention_event("C9", "U2", text, ts=ts), event_id="Ev1")
    e2 = await fake.push_event(
        fake.message_event("C9", "U2", text, ts=ts, channel_type="channel"), event_id="Ev2"
    )
    await fake.wait_for_ack(e1)
    await fake.wait_for_ack(e2)
    await asyncio.sleep(0.05)
    assert len(sink.messages) == 1
    assert sink.messages[0].mentioned is True and sink.messages[0].chat_type == "group"


async def test_same_event_pushed_twice_gives_one_inbound(socket_channel, fake):
    _, sink = socket_channel
    ev = fake.message_event("D1", "U1", "once")
    e1 = await fake.push_event(ev, event_id="EvSame")
    e2 = await fake.push_event(ev, event_id="EvSame", retry_attempt=1)
    await fake.wait_for_ack(e1)
    await fake.wait_for_ack(e2)
    await asyncio.sleep(0.05)
    assert len(sink.messages) == 1


async def test_ignored_subtypes_are_acked_without_inbound(socket_channel, fake):
    _, sink = socket_channel
    edited = fake.message_event(
        "C1",
        None,
        "",
        subtype="message_changed",
        message={"text": "edited", "user": "U1", "ts": "1.1"},
    )
    deleted = fake.message_event("C1", None, "", subtype="message_deleted", deleted_ts="1.1")
    joined = fake.message_event(
        "C1", "U3", "<@U3> has joined", subtype="channel_join", channel_type="channel"
    )
    other = {
        "type": "reaction_added",
        "user": "U1",
        "reaction": "eyes",
        "item": {"type": "message", "channel": "C1", "ts": "1.1"},
        "event_ts": "1.2",
    }
    envs = [await fake.push_event(e) for e in (edited, deleted, joined, other)]
    for env in envs:
        await fake.wait_for_ack(env)
    assert sink.messages == []


async def test_other_bots_are_flagged_and_own_messages_dropped(socket_channel, fake):
    _, sink = socket_channel
    e1 = await fake.push_event(
        fake.message_event("C1", None, "beep", bot_id="BOTHER", channel_type="channel")
    )
    e2 = await fake.push_event(
        fake.message_event("C1", "UBOT", "my own", bot_id="BBOT", channel_type="channel")
    )
    await fake.wait_for_ack(e1)
    await fake.wait_for_ack(e2)
    [m] = await sink.wait(1)
    assert m.sender_is_bot is True and m.sender_id == "BOTHER" and m.text == "beep"


async def test_reply_in_thread_the_bot_posted_in_counts_as_mention(socket_channel, fake):
    ch, sink = socket_channel
    # A thread where the bot replied (thread_ts = the user's root message).
    await ch.send(OutboundMessage(chat_id="C5", text="answer", thread_id="1700000000.000001"))
    # A thread started under a top-level bot message.
    [root_ts] = await ch.send(OutboundMessage(chat_id="C5", text="top level"))
    e1 = await fake.push_event(
        fake.message_event(
            "C5", "U2", "follow-up", thread_ts="1700000000.000001", channel_type="channel"
        )
    )
    e2 = await fake.push_event(
        fake.message_event("C5", "U2", "under yours", thread_ts=root_ts, channel_type="channel")
    )
    e3 = await fake.push_event(
        fake.message_event(
            "C5", "U2", "elsewhere", thread_ts="1600000000.000009", channel_type="channel"
        )
    )
    for e in (e1, e2, e3):
        await fake.wait_for_ack(e)
    got = {m.text: m for m in await sink.wait(3)}
    assert got["follow-up"].mentioned is True and got["follow-up"].thread_id == "1700000000.000001"
    assert got["under yours"].mentioned is True and got["under yours"].reply_to_bot is True
    assert got["under yours"].thread_id == root_ts
    assert got["elsewhere"].mentioned is False and got["elsewhere"].thread_id == "1600000000.000009"


def _files_in(path) -> list:
    return [p for p in path.rglob("*") if p.is_file()] if path.exists() else []


@pytest.fixture
def dest(tmp_path):
    """The core's per-turn download directory (exists, 0700)."""
    d = tmp_path / "inbound"
    d.mkdir(mode=0o700)
    return d


async def test_inbound_file_is_a_ref_until_fetched(socket_channel, fake, tmp_path, dest):
    ch, sink = socket_channel
    f = fake.add_file("pic.png", b"\x89PNGdata", "image/png")
    env = await fake.push_event(fake.message_event("D1", "U1", "look", files=[f]))
    await fake.wait_for_ack(env)
    [m] = await sink.wait(1)
    [a] = m.attachments
    assert a.kind == "image" and a.name == "pic.png" and a.mime == "image/png"
    # intake: the private URL only -- nothing fetched, nothing on disk
    assert a.target == "" and a.ref == f["url_private_download"] and a.size == len(b"\x89PNGdata")
    assert fake.downloads == []
    assert _files_in(tmp_path / "media") == [] and _files_in(dest) == []

    got = await ch.fetch_media(a, dest, max_bytes=1000)
    path = dest / got.target.rsplit("/", 1)[-1]
    assert got.target == str(path) and path.read_bytes() == b"\x89PNGdata"
    assert path.name.endswith("pic.png") and path.stat().st_mode & 0o777 == 0o600
    assert fake.downloads == [f["id"]]


async def test_fetch_uses_a_safe_unique_name(socket_channel, fake, dest):
    ch, _ = socket_channel
    f = fake.add_file("../../x y.txt", b"one", "text/plain")
    item = ch._attachments([f])[0]
    a = await ch.fetch_media(item, dest, 100)
    b = await ch.fetch_media(item, dest, 100)
    assert a.target != b.target
    for got in (a, b):
        path = dest / got.target.rsplit("/", 1)[-1]
        assert got.target == str(path) and path.read_bytes() == b"one" and "/" not in path.name[:-4]


async def test_fetch_refuses_declared_size_over_cap_without_downloading(socket_channel, fake, dest):
    ch, _ = socket_channel
    f = fake.add_file("big.bin", b"x" * 5000)
    [item] = ch._attachments([f])
    with pytest.raises(MediaTooLarge):
        await ch.fetch_media(item, dest, max_bytes=4999)
    assert fake.downloads == [] and _files_in(dest) == []


@pytest.mark.parametrize("declared", [10, None], ids=["lying-size", "no-size"])
@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
async def test_fetch_counts_bytes_when_the_size_lies(socket_channel, fake, dest, declared, chunked):
    ch, _ = socket_channel
    fake.chunked_downloads = chunked
    data = b"y" * 200_000
    f = fake.add_file("lies.bin", data, declared_size=declared)
    [item] = ch._attachments([f])
    assert item.size == (declared or 0)
    with pytest.raises(MediaTooLarge):
        await ch.fetch_media(item, dest, max_bytes=100_000)
    assert _files_in(dest) == []
    got = await ch.fetch_media(item, dest, max_bytes=200_000)  # the legitimate twin
    assert open(got.target, "rb").read() == data


async def test_fetch_failures_are_channel_errors(socket_channel, fake, dest):
    ch, _ = socket_channel
    f = fake.add_file("gone.bin", b"x")
    [item] = ch._attachments([f])
    del fake.files[f["id"]]
    with pytest.raises(ChannelError) as err:
        await ch.fetch_media(item, dest, 100)
    assert not isinstance(err.value, MediaTooLarge)
    # the bot token never goes to a host that is not Slack's
    foreign = MediaItem("document", "", name="x", ref="https://evil.example/files/F1/x")
    with pytest.raises(ChannelError):
        await ch.fetch_media(foreign, dest, 100)
    assert _files_in(dest) == []


# ------------------------------------------------------------------ outbound


async def test_send_long_text_in_mrkdwn_chunks(socket_channel, fake):
    ch, _ = socket_channel
    para = ("**bold** " + "word " * 150).strip()
    text = "\n\n".join([para] * 12)  # ~9.5k chars
    ids = await ch.send(OutboundMessage(chat_id="C1", text=text))
    posts = fake.posted
    assert len(posts) >= 3 and ids == [p["ts"] for p in posts]
    assert all(len(p["text"]) <= 4000 for p in posts)
    assert all(p["channel"] == "C1" and p["thread_ts"] is None for p in posts)
    assert "*bold*" in posts[0]["text"] and "**bold**" not in posts[0]["text"]
    assert all(p.get("mrkdwn") is True for p in posts)
    assert len(set(ids)) == len(ids)


async def test_escaping_never_pushes_a_post_over_the_chunk_limit(socket_channel, fake):
    """``&``/``<``/``>`` grow 4-5x when escaped: the Markdown is split finer instead."""
    ch, _ = socket_channel
    text = "Q&A <tags> " * 700  # 7.7k chars of Markdown, ~17k once escaped
    await ch.send(OutboundMessage(chat_id="C1", text=text))
    posts = [p["text"] for p in fake.posted]
    assert all(len(p) <= 4000 for p in posts), [len(p) for p in posts]
    joined = " ".join(posts).replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
    assert joined.split() == text.split()  # nothing lost, no entity cut in half
    assert not any(p.rstrip().endswith(("&", "&a", "&am", "&l", "&g", "&lt", "&gt")) for p in posts)


async def test_reply_tag_threads_all_chunks_under_trigger(socket_channel, fake):
    ch, _ = socket_channel
    text = "\n\n".join(["x " * 1500] * 3)
    await ch.send(
        OutboundMessage(
            chat_id="C1", text=text, reply_to_id="1700000000.000200", reply_mode="first"
        )
    )
    assert len(fake.posted) >= 2
    assert {p["thread_ts"] for p in fake.posted} == {"1700000000.000200"}


async def test_thread_id_wins_over_reply_to(socket_channel, fake):
    ch, _ = socket_channel
    await ch.send(OutboundMessage(chat_id="C1", text="hi", thread_id="111.1", reply_to_id="111.5"))
    assert fake.posted[0]["thread_ts"] == "111.1"


async def test_file_upload_v2_and_url_link_and_missing_file(socket_channel, fake, tmp_path):
    ch, _ = socket_channel
    p = tmp_path / "report.pdf"
    p.write_bytes(b"%PDF-1.4 fake")
    ids = await ch.send(
        OutboundMessage(
            chat_id="C1",
            text="here",
            thread_id="123.4",
            media=[
                MediaItem(kind="document", target=str(p)),
                MediaItem(kind="image", target="https://example.com/cat.png"),
                MediaItem(kind="document", target=str(tmp_path / "nope.txt")),
            ],
        )
    )
    [up] = fake.uploads
    assert up["filename"] == "report.pdf" and up["bytes"] == b"%PDF-1.4 fake"
    assert up["channel"] == "C1" and up["thread_ts"] == "123.4"
    texts = [x["text"] for x in fake.posted]
    assert texts == [
        "here",
        "Image: <https://example.com/cat.png|cat.png>",
        "[attachment unavailable: nope.txt]",
    ]
    assert all(x["thread_ts"] == "123.4" for x in fake.posted)
    assert len(ids) == 4 and up["ts"] in ids


async def test_media_link_is_safe_mrkdwn(socket_channel, fake):
    """A URL with | or > and a name with & cannot break out of the <url|text> link."""
    ch, _ = socket_channel
    await ch.send(
        OutboundMessage(
            chat_id="C1",
            media=[
                MediaItem(
                    kind="image", target="https://example.com/a|b>c.png?x=1&y=2", name="Q&A|x.png"
                ),
            ],
        )
    )
    [post] = fake.posted
    assert post["text"] == "Image: <https://example.com/a%7Cb%3Ec.png?x=1&amp;y=2|Q&amp;A¦x.png>"


async def test_upload_failure_becomes_note(socket_channel, fake, tmp_path):
    ch, _ = socket_channel
    p = tmp_path / "a.bin"
    p.write_bytes(b"1")
    fake.fail_next("files.getUploadURLExternal", status=200, retry_after=None, error="not_allowed")
    await ch.send(OutboundMessage(chat_id="C1", media=[MediaItem(kind="document", target=str(p))]))
    assert [x["text"] for x in fake.posted] == ["[attachment unavailable: a.bin]"]


async def test_429_is_honoured_then_succeeds(socket_channel, fake):
    ch, _ = socket_channel
    fake.fail_next("chat.postMessage", status=429, retry_after=1)
    t0 = time.monotonic()
    ids = await ch.send(OutboundMessage(chat_id="C1", text="hello"))
    assert time.monotonic() - t0 >= 0.95
    assert len(ids) == 1 and [p["text"] for p in fake.posted] == ["hello"]
    assert [m for m, _ in fake.calls].count("chat.postMessage") == 2


async def test_nothing_delivered_raises(socket_channel, fake):
    ch, _ = socket_channel
    fake.fail_next("chat.postMessage", status=200, retry_after=None, error="channel_not_found")
    with pytest.raises(ChannelError, match="channel_not_found"):
        await ch.send(OutboundMessage(chat_id="CX", text="hi"))
    with pytest.raises(ChannelError):
        await ch.send(OutboundMessage(chat_id="C1", text="   "))


async def test_send_works_without_start(fake):
    ch = SlackChannel(
        bot_token=fake.bot_token, app_token=fake.app_token, api_base=fake.api_base.rstrip("/")
    )
    assert await ch.send(OutboundMessage(chat_id="D1", text="proactive"))
    assert fake.posted[0]["text"] == "proactive"


async def test_reactions(socket_channel, fake):
    ch, _ = socket_channel
    await ch.react("C1", "1.2", "👀")
    await ch.react("C1", "1.2", "✅")
    await ch.react("C1", "1.2", "👍")
    await ch.react("C1", "1.2", ":tada:")
    await ch.react("C1", "1.2", "👀")  # already_reacted is fine
    assert [r["name"] for r in fake.reactions] == ["eyes", "white_check_mark", "thumbsup", "tada"]
    assert all(r["channel"] == "C1" and r["timestamp"] == "1.2" for r in fake.reactions)


def test_emoji_names():
    assert slack_emoji_name("❤️") == "heart"
    assert slack_emoji_name(":white_check_mark:") == "white_check_mark"
    assert slack_emoji_name("eyes") == "eyes"


# ------------------------------------------------------------------ HTTP Events API


async def test_http_url_verification(http_channel, fake):
    ch, sink = http_channel
    status, body = await post_http_event(
        ch.http_url, SECRET, {"token": "t", "challenge": "abc123", "type": "url_verification"}
    )
    assert status == 200 and "abc123" in body
    assert sink.messages == []


async def test_http_signed_event_becomes_inbound(http_channel, fake):
    ch, sink = http_channel
    ev = fake.app_mention_event("C7", "U1", "<@UBOT> ping")
    status, _ = await post_http_event(ch.http_url, SECRET, fake.event_callback(ev))
    assert status == 200
    [m] = sink.messages  # the sink ran before the 200 came back
    assert m.chat_id == "C7" and m.mentioned and m.chat_type == "group" and m.text == "@chela ping"
    # Slack retry of the message event for the same ts: acked, not delivered again
    status, _ = await post_http_event(
        ch.http_url,
        SECRET,
        fake.event_callback(
            fake.message_event("C7", "U1", "<@UBOT> ping", ts=ev["ts"], channel_type="channel")
        ),
        retry_num=1,
    )
    assert status == 200 and len(sink.messages) == 1


async def test_http_bad_signature_is_rejected(http_channel, fake):
    ch, sink = http_channel
    ev = fake.message_event("D1", "U1", "sneaky")
    status, _ = await post_http_event(
        ch.http_url, SECRET, fake.event_callback(ev), bad_signature=True
    )
    assert status == 401
    status, _ = await post_http_event(
        ch.http_url, SECRET, fake.event_callback(ev), timestamp=int(time.time()) - 3600
    )
    assert status == 401
    assert sink.messages == []


async def test_http_sink_failure_gives_error_status(fake):
    sink = Sink(fail_times=1)
    ch = SlackChannel(
        mode="http",
        bot_token=fake.bot_token,
        signing_secret=SECRET,
        api_base=fake.api_base,
        listen="127.0.0.1:0",
    )
    await ch.start(sink)
    try:
        payload = fake.event_callback(fake.message_event("D1", "U1", "x"))
        status, _ = await post_http_event(ch.http_url, SECRET, payload)
        assert status >= 500 and sink.messages == []
        status, _ = await post_http_event(ch.http_url, SECRET, payload, retry_num=1)
        assert status == 200 and len(sink.messages) == 1
    finally:
        await ch.stop()


async def test_inbound_order_is_preserved(socket_channel, fake):
    _, sink = socket_channel
    envs = [await fake.push_event(fake.message_event("D1", "U1", f"m{i}")) for i in range(8)]
    for e in envs:
        await fake.wait_for_ack(e)
    assert [m.text for m in sink.messages] == [f"m{i}" for i in range(8)]


async def test_socket_reconnects_on_disconnect_request(socket_channel, fake):
    _, sink = socket_channel
    await fake.send_disconnect()
    await fake.wait_for_connections(2)
    env = await fake.push_event(fake.message_event("D1", "U1", "after reconnect"))
    await fake.wait_for_ack(env)
    assert [m.text for m in sink.messages] == ["after reconnect"]
    assert [m for m, _ in fake.calls].count("apps.connections.open") == 2


async def test_open_for_sending_uses_the_web_api_only(fake):
    ch = SlackChannel(bot_token=fake.bot_token, app_token=fake.app_token, api_base=fake.api_base)
    await ch.open_for_sending()
    try:
        await ch.send(OutboundMessage(chat_id="C1", text="reminder"))
    finally:
        await ch.stop()
    assert [p["text"] for p in fake.posted] == ["reminder"]
    assert fake.socket_connections == 0 and ch.bot_identity["id"]


async def test_open_for_sending_reports_a_bad_token(fake):
    ch = SlackChannel(bot_token="xoxb-wrong", app_token=fake.app_token, api_base=fake.api_base)
    with pytest.raises(ChannelError, match="auth.test failed"):
        await ch.open_for_sending()


# ------------------------------------------------------------------ live previews


async def test_preview_is_edited_into_the_first_chunk(socket_channel, fake):
    ch, _ = socket_channel
    preview = await ch.send_preview("C1", "Hel", thread_id="5.5")
    await ch.edit_preview("C1", preview, "Hello **there**")
    text = "\n\n".join(["x " * 1500] * 3)
    ids = await ch.send(OutboundMessage(chat_id="C1", text=text, thread_id="5.5", edit_id=preview))
    assert ids[0] == preview and len(ids) >= 2
    assert fake.updates[0]["text"] == "Hello *there*"
    [p0, *rest] = fake.visible_posts("C1")
    assert p0["ts"] == preview and p0["text"] == fake.updates[-1]["text"]
    assert [p["ts"] for p in rest] == ids[1:] and fake.deleted == []
    assert {p["thread_ts"] for p in fake.posted} == {"5.5"}


async def test_preview_that_cannot_be_edited_is_replaced_by_a_new_post(socket_channel, fake):
    ch, _ = socket_channel
    preview = await ch.send_preview("C1", "Hel")
    fake.fail_next("chat.update", status=200, retry_after=None, error="cant_update_message")
    ids = await ch.send(OutboundMessage(chat_id="C1", text="Hello there", edit_id=preview))
    assert fake.deleted == [preview]
    assert [p["text"] for p in fake.visible_posts("C1")] == ["Hello there"]
    assert ids == [fake.visible_posts("C1")[0]["ts"]] and ids != [preview]


async def test_preview_edit_failing_for_now_raises_and_keeps_the_preview(socket_channel, fake):
    ch, _ = socket_channel
    preview = await ch.send_preview("C1", "Hel")
    from slack_sdk.errors import SlackApiError

    fake.fail_next("chat.update", status=200, retry_after=None, error="internal_error")
    with pytest.raises(SlackApiError, match="internal_error"):  # the outbox retries it
        await ch.send(OutboundMessage(chat_id="C1", text="Hello there", edit_id=preview))
    assert fake.deleted == [] and [p["ts"] for p in fake.visible_posts("C1")] == [preview]


async def test_a_thread_the_bot_uploaded_a_file_to_counts_as_its_thread(
    socket_channel, fake, tmp_path
):
    ch, sink = socket_channel
    p = tmp_path / "chart.png"
    p.write_bytes(b"\x89PNG")
    await ch.send(
        OutboundMessage(chat_id="C5", thread_id="7.7", media=[MediaItem("image", str(p))])
    )
    assert [u["thread_ts"] for u in fake.uploads] == ["7.7"] and fake.posted == []
    envs = [
        await fake.push_event(
            fake.message_event("C5", "U2", text, thread_ts=thread, channel_type="channel")
        )
        for text, thread in (("nice chart", "7.7"), ("other thread", "8.8"))
    ]
    for env in envs:
        await fake.wait_for_ack(env)
    got = {m.text: m.mentioned for m in await sink.wait(2)}
    assert got == {"nice chart": True, "other thread": False}
