"""The Slack translators as tables: events → InboundMessage, OutboundMessage → Web API calls.
Pure functions, no server, no event loop."""

from __future__ import annotations

import ast
import copy
import itertools
from pathlib import Path
from typing import Any

import pytest

from tests import fuzz
from channels.base import InboundMessage, MediaItem, OutboundMessage
from channels.slack import translate
from channels.slack.translate import DELETE, POST, REACT, UPDATE, UPLOAD, ApiCall, BotIdentity

BOT = BotIdentity(user_id="UBOT", bot_id="BBOT", username="chela")
TS = "1700000000.000100"
ROOT = "1700000000.000001"
NOW = 1_234_567.0


def message(
    text: Any = "hi",
    *,
    channel: Any = "D123",
    user: Any = "U1",
    ts: Any = TS,
    channel_type: Any = "im",
    **extra: Any,
) -> dict[str, Any]:
    """A ``message`` event as the Events API delivers it (``event`` of the callback)."""
    ev: dict[str, Any] = {
        "type": "message",
        "channel": channel,
        "user": user,
        "text": text,
        "ts": ts,
        "event_ts": ts,
        "channel_type": channel_type,
        "team": "T1",
        "client_msg_id": "0c6b0e1e-0000-4000-8000-000000000000",
    }
    ev.update(extra)
    return {k: v for k, v in ev.items() if v is not None}


def mention_event(text: str = "<@UBOT> ping", **extra: Any) -> dict[str, Any]:
    ev = {"type": "app_mention", "channel": "C9", "user": "U2", "text": text, "ts": TS}
    ev.update(extra)
    return ev


def file_obj(name: str = "pic.png", mimetype: str | None = "image/png", **extra: Any) -> dict:
    url = f"https://files.slack.com/files-pri/T1-F1/{name}"
    f: dict[str, Any] = {
        "id": "F1",
        "name": name,
        "title": name,
        "mimetype": mimetype,
        "size": 42,
        "url_private": url,
        "url_private_download": url + "?download=1",
    }
    f.update(extra)
    return {k: v for k, v in f.items() if v is not None}


def inbound(ev: object, **kw: Any) -> InboundMessage | None:
    kw.setdefault("bot", BOT)
    kw.setdefault("now", NOW)
    return translate.inbound_message(ev, **kw)


# ----------------------------------------------------------------------------- inbound table

INBOUND = [
    pytest.param(
        message("hello &amp; <@UBOT> hi"),
        {},
        {
            "channel": "slack",
            "chat_id": "D123",
            "chat_type": "direct",
            "sender_id": "U1",
            "text": "hello & @chela hi",
            "message_id": TS,
            "raw_id": f"D123:{TS}",
            "timestamp": 1700000000.0001,
            "mentioned": True,
            "sender_is_bot": False,
            "thread_id": None,
            "reply_to_id": None,
            "reply_to_bot": False,
            "group_kind": "channel",
            "account": "default",
            "attachments": [],
        },
        id="dm-with-mention",
    ),
    pytest.param(
        message("plain", channel_type=None),
        {"account": "work"},
        {"chat_type": "direct", "mentioned": False, "account": "work"},
        id="dm-kind-from-the-D-channel-id",
    ),
    pytest.param(
        message("just chatting", channel="C9", channel_type="channel"),
        {},
        {"chat_id": "C9", "chat_type": "group", "mentioned": False},
        id="channel-without-mention",
    ),
    pytest.param(
        message("x", channel="C9", channel_type=None),
        {},
        {"chat_type": "group"},
        id="channel-kind-from-the-C-channel-id",
    ),
    pytest.param(
        message("psst", channel="G7", channel_type="mpim"),
        {},
        {"chat_type": "group", "chat_id": "G7"},
        id="group-dm-is-a-group",
    ),
    pytest.param(
        message("yo <@UBOT|chela> there", channel="C9", channel_type="channel"),
        {},
        {"text": "yo @chela there", "mentioned": True},
        id="mention-with-label",
    ),
    pytest.param(
        message("ask <@U2> &lt;b&gt;", channel="C9", channel_type="channel"),
        {},
        {"text": "ask <@U2> <b>", "mentioned": False},
        id="someone-else-mentioned",
    ),
    pytest.param(
        mention_event(),
        {},
        {"chat_id": "C9", "chat_type": "group", "mentioned": True, "text": "@chela ping"},
        id="app-mention-event",
    ),
    pytest.param(
        mention_event("hey you"),
        {},
        {"mentioned": True, "text": "hey you"},
        id="app-mention-event-mentions-even-without-the-tag",
    ),
    pytest.param(
        message("<@UBOT> hi", channel="C9", channel_type="channel"),
        {"bot": BotIdentity(user_id="UBOT")},
        {"text": "@bot hi", "mentioned": True},
        id="bot-without-a-name",
    ),
    pytest.param(
        message("<@UBOT> hi", channel="C9", channel_type="channel"),
        {"bot": BotIdentity()},
        {"text": "<@UBOT> hi", "mentioned": False},
        id="bot-identity-unknown",
    ),
    pytest.param(
        message("under yours", channel="C5", channel_type="channel", thread_ts=ROOT),
        {"bot_threads": {ROOT}, "bot_roots": {ROOT}},
        {"thread_id": ROOT, "reply_to_id": ROOT, "reply_to_bot": True, "mentioned": True},
        id="reply-in-a-thread-under-the-bots-message",
    ),
    pytest.param(
        message("follow-up", channel="C5", channel_type="channel", thread_ts=ROOT),
        {"bot_threads": {ROOT}},
        {"thread_id": ROOT, "reply_to_bot": False, "mentioned": True},
        id="reply-in-a-thread-the-bot-posted-in",
    ),
    pytest.param(
        message("elsewhere", channel="C5", channel_type="channel", thread_ts=ROOT),
        {"bot_threads": {"1.1"}, "bot_roots": {"1.1"}},
        {"thread_id": ROOT, "reply_to_id": ROOT, "reply_to_bot": False, "mentioned": False},
        id="reply-in-another-thread",
    ),
    pytest.param(
        message("root", channel="C5", channel_type="channel", thread_ts=TS),
        {"bot_threads": {TS}},
        {"thread_id": None, "reply_to_id": None, "mentioned": False},
        id="thread-root-itself-is-not-in-a-thread",
    ),
    pytest.param(
        message("also here", channel="C5", thread_ts=ROOT, subtype="thread_broadcast"),
        {},
        {"thread_id": ROOT, "text": "also here"},
        id="thread-broadcast",
    ),
    pytest.param(
        message("beep", user=None, bot_id="BOTHER", subtype="bot_message", username="ci"),
        {},
        {"sender_id": "BOTHER", "sender_is_bot": True, "sender_name": "ci"},
        id="other-bot",
    ),
    pytest.param(
        message("beep", bot_id="BOTHER"),
        {},
        {"sender_id": "U1", "sender_is_bot": True},
        id="other-app-posting-as-a-user",
    ),
    pytest.param(
        message("waves", subtype="me_message"),
        {},
        {"text": "waves"},
        id="me-message",
    ),
    pytest.param(
        message("hi", user_profile={"display_name": "Al", "real_name": "Alice L", "name": "alice"}),
        {},
        {"sender_name": "Al", "sender_username": "alice"},
        id="profile-display-name",
    ),
    pytest.param(
        message("hi", user_profile={"display_name": "", "real_name": "Alice L"}),
        {},
        {"sender_name": "Alice L", "sender_username": ""},
        id="profile-real-name",
    ),
    pytest.param(
        message("/new"),
        {},
        {"text": "/new", "mentioned": False},
        id="command",
    ),
    pytest.param(
        message("<@UBOT> /status now", channel="C9", channel_type="channel"),
        {},
        {"text": "@chela /status now", "mentioned": True},
        id="command-addressed-in-a-channel",
    ),
    pytest.param(
        message("x", ts="not-a-number"),
        {},
        {"timestamp": NOW, "message_id": "not-a-number"},
        id="ts-not-a-number-uses-now",
    ),
    pytest.param(
        message("x", ts="nan"),
        {},
        {"timestamp": NOW},
        id="ts-nan-uses-now",
    ),
]


@pytest.mark.parametrize(("ev", "kw", "expected"), INBOUND)
def test_inbound(ev: dict[str, Any], kw: dict[str, Any], expected: dict[str, Any]) -> None:
    before = copy.deepcopy(ev)
    msg = inbound(ev, **kw)
    assert msg is not None
    assert {k: getattr(msg, k) for k in expected} == expected
    assert ev == before  # the event is not touched


def _one(f: dict[str, Any]) -> dict[str, Any]:
    msg = inbound(message("", subtype="file_share", files=[f]))
    assert msg is not None
    [item] = msg.attachments
    return {k: getattr(item, k) for k in ("kind", "name", "mime", "ref", "size", "target")}


URL = "https://files.slack.com/files-pri/T1-F1/"

ATTACHMENTS = [
    pytest.param(
        file_obj("pic.png", "image/png"),
        {
            "kind": "image",
            "name": "pic.png",
            "mime": "image/png",
            "ref": URL + "pic.png?download=1",
            "size": 42,
            "target": "",
        },
        id="image",
    ),
    pytest.param(file_obj("clip.mp4", "video/mp4"), {"kind": "video"}, id="video"),
    pytest.param(file_obj("song.mp3", "audio/mpeg"), {"kind": "audio"}, id="audio"),
    pytest.param(
        file_obj("audio_message.webm", "audio/webm", subtype="slack_audio"),
        {"kind": "voice", "mime": "audio/webm"},
        id="voice-clip",
    ),
    pytest.param(
        file_obj("notes.pdf", "application/pdf"),
        {"kind": "document", "mime": "application/pdf"},
        id="document",
    ),
    pytest.param(
        file_obj("scan.jpg", None),
        {"kind": "document", "mime": "image/jpeg"},
        id="no-mimetype-guessed-from-the-name",
    ),
    pytest.param(
        file_obj("Q.bin", "IMAGE/PNG"), {"kind": "image", "mime": "IMAGE/PNG"}, id="mime-case"
    ),
    pytest.param(
        {**file_obj("a.txt", "text/plain"), "url_private_download": None},
        {"ref": URL + "a.txt"},
        id="private-url-when-no-download-url",
    ),
    pytest.param(
        {**file_obj(name="", title="Shown title"), "name": ""},
        {"name": "Shown title"},
        id="name-from-title",
    ),
    pytest.param(
        {**file_obj(), "name": None, "title": None},
        {"name": "F1"},
        id="name-from-id",
    ),
    pytest.param({**file_obj(), "size": "17"}, {"size": 17}, id="size-as-string"),
    pytest.param({**file_obj(), "size": "lots"}, {"size": 0}, id="size-garbage"),
    pytest.param({**file_obj(), "size": -5}, {"size": 0}, id="size-negative"),
    pytest.param({**file_obj(), "size": float("inf")}, {"size": 0}, id="size-infinite"),
]


@pytest.mark.parametrize(("f", "expected"), ATTACHMENTS)
def test_attachment_kinds(f: dict[str, Any], expected: dict[str, Any]) -> None:
    got = _one(f)
    assert {k: got[k] for k in expected} == expected


def test_attachments_without_a_url_are_left_out_and_the_rest_kept() -> None:
    tomb = {"id": "F9", "mode": "tombstone"}
    external = {"id": "F8", "name": "x.gdoc", "url_private": ""}
    msg = inbound(message("see", files=[tomb, "junk", external, file_obj("b.png")]))
    assert msg is not None
    assert [a.name for a in msg.attachments] == ["b.png"]


IGNORED = [
    pytest.param(
        message(
            None,
            user=None,
            subtype="message_changed",
            message={"text": "edited", "user": "U1", "ts": "1.1"},
        ),
        id="edited",
    ),
    pytest.param(
        message(None, user=None, subtype="message_deleted", deleted_ts="1.1"), id="deleted"
    ),
    pytest.param(message("<@U3> has joined", user="U3", subtype="channel_join"), id="channel-join"),
    pytest.param(message("topic", subtype="channel_topic"), id="topic-change"),
    pytest.param(message("x", subtype=["file_share"]), id="subtype-not-a-string"),
    pytest.param(
        {
            "type": "reaction_added",
            "user": "U1",
            "reaction": "eyes",
            "item": {"type": "message", "channel": "C1", "ts": "1.1"},
            "event_ts": "1.2",
        },
        id="reaction",
    ),
    pytest.param({"type": "app_home_opened", "user": "U1", "channel": "D1"}, id="unknown-type"),
    pytest.param(message("my own", user="UBOT", bot_id="BBOT"), id="own-message"),
    pytest.param(message("my own", user="UBOT"), id="own-message-by-member-id"),
    pytest.param(
        message("my own", user=None, bot_id="BBOT", subtype="bot_message"),
        id="own-message-by-bot-id",
    ),
    pytest.param(message("x", channel=""), id="no-channel"),
    pytest.param(message("x", channel=None), id="channel-missing"),
    pytest.param(message("x", channel=123), id="channel-not-a-string"),
    pytest.param(message("x", ts=None), id="no-ts"),
    pytest.param(message("x", ts=1700000000.5), id="ts-not-a-string"),
    pytest.param({**message(), "type": None}, id="no-type"),
    pytest.param(["not", "an", "event"], id="not-an-object"),
    pytest.param(None, id="null"),
]


@pytest.mark.parametrize("ev", IGNORED)
def test_inbound_ignored(ev: object) -> None:
    assert inbound(ev) is None


@pytest.mark.parametrize(
    "ev",
    [
        pytest.param(message("my own", user="U1", bot_id="BOTHER"), id="own-shape-other-sender"),
        pytest.param(message("joined", user="U3", subtype="file_share"), id="allowed-subtype"),
        pytest.param(message("x", ts="1.5"), id="ts-string"),
    ],
)
def test_ignored_twins_are_delivered(ev: dict[str, Any]) -> None:
    # the same shapes with the one field that made them ignorable changed are messages
    assert inbound(ev) is not None


JUNK = [*fuzz.JUNK, "D", "<@UBOT>"]  # the shared junk plus what matters to this platform


def test_malformed_fields_never_raise() -> None:
    """Every field of a rich event replaced by every kind of junk: the translator returns
    None or a message made of the right types, and never raises."""
    rich = message(
        "<@UBOT> look &amp; see",
        channel="C5",
        channel_type="channel",
        thread_ts=ROOT,
        subtype="file_share",
        user_profile={"display_name": "Al", "real_name": "Alice", "name": "alice"},
        files=[
            file_obj("a.png", "image/png"),
            file_obj("v.webm", "audio/webm", subtype="slack_audio"),
        ],
    )
    assert inbound(rich, bot_threads={ROOT}, bot_roots={ROOT}) is not None
    cases = 0
    for path, junk in itertools.product(fuzz.paths(rich), JUNK):
        msg = inbound(fuzz.replace(rich, path, junk), bot_threads={ROOT}, bot_roots={ROOT})
        cases += 1
        if msg is None:
            continue
        assert isinstance(msg.text, str) and isinstance(msg.chat_id, str) and msg.chat_id
        assert isinstance(msg.message_id, str) and msg.message_id
        assert isinstance(msg.sender_id, str) and isinstance(msg.sender_name, str)
        assert isinstance(msg.sender_username, str)
        assert msg.thread_id is None or isinstance(msg.thread_id, str)
        assert isinstance(msg.timestamp, float) and msg.timestamp == msg.timestamp
        assert msg.chat_type in ("direct", "group")
        for item in msg.attachments:
            assert isinstance(item.name, str) and isinstance(item.mime, str)
            assert isinstance(item.ref, str) and item.ref and isinstance(item.size, int)
            assert item.size >= 0
    assert cases > 500


# ----------------------------------------------------------------------------- outbound


def plan(msg: OutboundMessage, **kw: Any) -> list[ApiCall]:
    kw.setdefault("chunk_limit", 4000)
    return translate.plan_send(msg, **kw)


def post(text: str, chat: str = "C1", thread: str | None = None) -> ApiCall:
    params: dict[str, Any] = {"channel": chat, "text": text, "mrkdwn": True}
    if thread:
        params["thread_ts"] = thread
    return ApiCall(POST, params)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("hello", "hello"),
        ("Hello **Alice**!", "Hello *Alice*!"),
        (
            "**bold** and [link](https://x.y/a?b=1&c=2) `code` _it_ ~~s~~",
            "*bold* and <https://x.y/a?b=1&amp;c=2|link> `code` _it_ ~s~",
        ),
        ("# Title\n\n- a\n- b", "*Title*\n\n• a\n• b"),
        ("Q&A <tags>", "Q&amp;A &lt;tags&gt;"),
        ("  padded \n", "padded"),
    ],
)
def test_text_is_formatted_as_mrkdwn(text: str, expected: str) -> None:
    assert plan(OutboundMessage(chat_id="C1", text=text)) == [post(expected)]


@pytest.mark.parametrize(
    "msg",
    [
        OutboundMessage(chat_id="C1", text=""),
        OutboundMessage(chat_id="C1", text="   \n "),
        OutboundMessage(chat_id="C1", text="", edit_id="9.9"),
    ],
)
def test_nothing_to_send_plans_nothing(msg: OutboundMessage) -> None:
    assert plan(msg) == []


@pytest.mark.parametrize("limit", [150, 500, 4000])
def test_chunking_at_the_limit(limit: int) -> None:
    words = [f"w{i}" for i in range(limit)]  # well over the limit
    text = " ".join(words)
    calls = plan(OutboundMessage(chat_id="C1", text=text), chunk_limit=limit)
    assert len(calls) >= 2 and {c.method for c in calls} == {POST}
    texts = [c.params["text"] for c in calls]
    assert all(len(t) <= limit for t in texts), [len(t) for t in texts]
    assert " ".join(texts).split() == words  # nothing lost, nothing cut inside a word


@pytest.mark.parametrize("limit", [150, 4000])
def test_text_of_exactly_the_limit_is_one_post(limit: int) -> None:
    text = ("abcd " * limit)[: limit - 1] + "z"
    assert len(text) == limit
    assert plan(OutboundMessage(chat_id="C1", text=text), chunk_limit=limit) == [post(text)]
    over = plan(OutboundMessage(chat_id="C1", text=text + " y"), chunk_limit=limit)
    assert len(over) == 2


def test_escaping_never_pushes_a_post_over_the_limit() -> None:
    """``&``/``<``/``>`` grow 4-5x when escaped: the Markdown is split finer instead."""
    text = "Q&A <tags> " * 700
    calls = plan(OutboundMessage(chat_id="C1", text=text), chunk_limit=4000)
    posts = [c.params["text"] for c in calls]
    assert all(len(p) <= 4000 for p in posts), [len(p) for p in posts]
    joined = " ".join(posts).replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
    assert joined.split() == text.split()


LONG = "\n\n".join(["x " * 1500] * 3)


@pytest.mark.parametrize(
    ("kw", "thread"),
    [
        pytest.param({}, None, id="unthreaded"),
        pytest.param({"thread_id": "111.1"}, "111.1", id="thread"),
        pytest.param({"reply_to_id": "111.5", "reply_mode": "first"}, "111.5", id="reply-first"),
        pytest.param({"reply_to_id": "111.5", "reply_mode": "all"}, "111.5", id="reply-all"),
        pytest.param({"thread_id": "111.1", "reply_to_id": "111.5"}, "111.1", id="thread-wins"),
    ],
)
def test_reply_threading_applies_to_every_chunk_and_file(
    kw: dict[str, Any], thread: str | None
) -> None:
    media = [
        MediaItem(kind="document", target="/srv/r.pdf"),
        MediaItem(kind="image", target="https://e.com/c.png"),
    ]
    msg = OutboundMessage(chat_id="C1", text=LONG, media=media, **kw)
    calls = plan(msg, local_files={"/srv/r.pdf"})
    assert [c.method for c in calls][-2:] == [UPLOAD, POST] and len(calls) >= 4
    posts = [c for c in calls if c.method == POST]
    assert {c.params.get("thread_ts") for c in posts} == {thread}
    assert all(("thread_ts" in c.params) == bool(thread) for c in posts)
    [upload] = [c for c in calls if c.method == UPLOAD]
    assert upload.params["thread_ts"] == thread
    assert translate.thread_for(msg) == thread


def test_media(tmp_path: Path) -> None:
    report = str(tmp_path / "report.pdf")
    msg = OutboundMessage(
        chat_id="C1",
        text="here",
        thread_id="123.4",
        media=[
            MediaItem(kind="document", target=report),
            MediaItem(kind="image", target="https://example.com/cat.png"),
            MediaItem(kind="voice", target="https://example.com/v.ogg", name="Voice note"),
            MediaItem(kind="video", target="https://example.com/m.mp4"),
            MediaItem(kind="document", target="https://example.com/"),
            MediaItem(kind="document", target=str(tmp_path / "nope.txt")),
            MediaItem(kind="image", target="relative/p&q.png"),
        ],
    )
    calls = plan(msg, local_files={report})
    note = post("[attachment unavailable: report.pdf]", thread="123.4")
    assert calls == [
        post("here", thread="123.4"),
        ApiCall(
            UPLOAD,
            {
                "channel": "C1",
                "file": report,
                "filename": "report.pdf",
                "title": "report.pdf",
                "thread_ts": "123.4",
            },
            (note,),
        ),
        post("Image: <https://example.com/cat.png|cat.png>", thread="123.4"),
        post("Audio: <https://example.com/v.ogg|Voice note>", thread="123.4"),
        post("Video: <https://example.com/m.mp4|m.mp4>", thread="123.4"),
        post("File: <https://example.com/|attachment>", thread="123.4"),
        post("[attachment unavailable: nope.txt]", thread="123.4"),
        post("[attachment unavailable: p&amp;q.png]", thread="123.4"),
    ]


def test_media_link_is_safe_mrkdwn() -> None:
    item = MediaItem(kind="image", target="https://example.com/a|b>c.png?x=1&y=2", name="Q&A|x.png")
    [call] = plan(OutboundMessage(chat_id="C1", media=[item]))
    assert call.params["text"] == (
        "Image: <https://example.com/a%7Cb%3Ec.png?x=1&amp;y=2|Q&amp;A¦x.png>"
    )


def test_the_translator_does_not_look_at_the_disk(tmp_path: Path) -> None:
    # a file that exists but is not among local_files is a note; one that is listed but
    # does not exist is planned as an upload (the caller decides what is on disk)
    real = tmp_path / "real.txt"
    real.write_text("x")
    ghost = str(tmp_path / "ghost.txt")
    media = [MediaItem(kind="document", target=str(real)), MediaItem("document", ghost)]
    calls = plan(OutboundMessage(chat_id="C1", media=media), local_files={ghost})
    assert [c.method for c in calls] == [POST, UPLOAD]
    assert calls[0].params["text"] == "[attachment unavailable: real.txt]"


def test_preview_edit_becomes_the_first_chunk() -> None:
    msg = OutboundMessage(chat_id="C1", text=LONG, edit_id="9.9", thread_id="5.5")
    calls = plan(msg, chunk_limit=4000)
    chunks = translate.render_chunks(LONG, 4000)
    assert len(chunks) >= 2
    first = post(chunks[0], thread="5.5")
    assert calls[0] == ApiCall(
        UPDATE,
        {"channel": "C1", "ts": "9.9", "text": chunks[0]},
        (ApiCall(DELETE, {"channel": "C1", "ts": "9.9"}), first),
    )
    assert calls[1:] == [post(c, thread="5.5") for c in chunks[1:]]


def test_preview_with_media_only_is_left_alone() -> None:
    item = MediaItem(kind="image", target="https://e.com/c.png")
    calls = plan(OutboundMessage(chat_id="C1", media=[item], edit_id="9.9"))
    assert [c.method for c in calls] == [POST]


@pytest.mark.parametrize(
    ("resp", "expected"),
    [
        ({"files": [{"id": "F1", "shares": {"public": {"C1": [{"ts": "7.7"}]}}}]}, "7.7"),
        ({"files": [{"id": "F1", "shares": {"private": {"C1": [{"ts": "8.8"}]}}}]}, "8.8"),
        ({"files": [{"id": "F1", "shares": {"public": {"C2": [{"ts": "7.7"}]}}}]}, "F1"),
        ({"file": {"id": "F2"}}, "F2"),
        ({"files": [None, {"id": "F3", "shares": "junk"}]}, "F3"),
        ({"files": "junk"}, ""),
        ({}, ""),
    ],
)
def test_upload_id(resp: dict[str, Any], expected: str) -> None:
    assert translate.upload_id(resp, "C1") == expected


def test_previews() -> None:
    assert translate.preview_post("C1", "**hi**", limit=100) == post("*hi*")
    assert translate.preview_post("C1", "x", limit=100, thread_id="1.1", reply_to_id="2.2") == post(
        "x", thread="1.1"
    )
    assert translate.preview_post("C1", "x", limit=100, reply_to_id="2.2") == post(
        "x", thread="2.2"
    )
    edit = translate.preview_edit("C1", "3.3", "a & b " * 50, limit=20)
    assert edit == ApiCall(UPDATE, {"channel": "C1", "ts": "3.3", "text": "a &amp; b a &amp; b "})
    assert translate.delete_call("C1", "3.3") == ApiCall(DELETE, {"channel": "C1", "ts": "3.3"})


@pytest.mark.parametrize(
    ("emoji", "name"),
    [
        ("👀", "eyes"),
        ("❤️", "heart"),
        ("✅", "white_check_mark"),
        (":tada:", "tada"),
        ("thumbsup", "thumbsup"),
        ("+1", "+1"),
        ("", None),
        ("::", None),
        ("a b", None),
        ("<script>", None),
    ],
)
def test_reactions(emoji: str, name: str | None) -> None:
    call = translate.reaction_call("C1", "1.2", emoji)
    if name is None:
        assert call is None
    else:
        assert call == ApiCall(REACT, {"channel": "C1", "timestamp": "1.2", "name": name})


@pytest.mark.parametrize(
    ("url", "allowed"),
    [
        ("https://files.slack.com/files-pri/T1-F1/a.png", True),
        ("https://slack.com/x", True),
        ("http://127.0.0.1:9/files/F1/a", True),  # the configured API host (tests, proxies)
        ("https://evil.example/files/F1/x", False),
        ("https://slack.com.evil.example/x", False),
        ("https://notslack.com/x", False),
    ],
)
def test_the_bot_token_only_goes_to_slack(url: str, allowed: bool) -> None:
    assert translate.token_allowed_for(url, "http://127.0.0.1:9/api/") is allowed


@pytest.mark.parametrize(
    ("name", "safe"),
    [("../../x y.txt", "x_y.txt"), ("...", "file"), ("ok-1.png", "ok-1.png"), ("a" * 99, "a" * 80)],
)
def test_safe_file_name(name: str, safe: str) -> None:
    assert translate.safe_file_name(name) == safe


# ----------------------------------------------------------------------------- purity

ALLOWED_IMPORTS = {
    "__future__",
    "collections.abc",
    "dataclasses",
    "math",
    "mimetypes",  # guess_type: a table lookup (the system table is loaded once, read-only)
    "pathlib",
    "re",
    "typing",
    "urllib.parse",
    "channels.base",
    "channels.chunking",
    "channels.formatting",
}


def test_translate_imports_no_io() -> None:
    path = Path(translate.__file__)
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    assert names, "the walk must see the module's imports"
    assert names <= ALLOWED_IMPORTS, names - ALLOWED_IMPORTS


def test_bare_urls_are_sent_as_slack_links_ending_where_the_url_ends() -> None:
    """docs/channels.md, "Slack wraps bare URLs": the brackets fix the link's extent (the
    trailing comma and parenthesis stay text) and ``&`` is escaped inside as everywhere."""
    from channels.formatting import markdown_to_slack_mrkdwn

    got = markdown_to_slack_mrkdwn("see https://x.org/?a=1&b=2, (https://y.org/p) ok")
    assert got == "see <https://x.org/?a=1&amp;b=2>, (<https://y.org/p>) ok"
    assert markdown_to_slack_mrkdwn("[docs](https://e.org/d)") == "<https://e.org/d|docs>"
