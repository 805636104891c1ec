"""The Telegram translators as tables: raw updates → InboundMessage, OutboundMessage → Bot API
calls.  Pure functions, no server, no event loop."""

from __future__ import annotations

import ast
import copy
import itertools
from pathlib import Path
from typing import Any

import pytest
from telegram import Update

from tests import fuzz
from channels.base import InboundMessage, MediaItem, OutboundMessage
from channels.telegram import translate
from channels.telegram.translate import ApiCall, LocalFile, Me, PreviewEdit, TextSend

BOT_ID = 777000
ME = Me(str(BOT_ID), "chela_bot")
ALICE = 42
GROUP = -100123
DATE = 1_700_000_000
UID = 5001


def user(uid: int = ALICE, first: str = "Alice", **kw: Any) -> dict[str, Any]:
    return {"id": uid, "is_bot": False, "first_name": first, **kw}


def message(
    text: str | None = "hi",
    *,
    chat_id: Any = ALICE,
    chat_type: str = "private",
    sender: dict[str, Any] | None = None,
    message_id: Any = 7,
    **fields: Any,
) -> dict[str, Any]:
    """A ``message`` object as getUpdates returns it."""
    chat: dict[str, Any] = {"id": chat_id, "type": chat_type}
    if chat_type != "private":
        chat["title"] = "Friends"
    msg: dict[str, Any] = {
        "message_id": message_id,
        "from": sender if sender is not None else user(),
        "chat": chat,
        "date": DATE,
    }
    if text is not None:
        msg["text"] = text
    msg.update(fields)
    return msg


def update(msg: dict[str, Any] | None = None, *, kind: str = "message", uid: int = UID) -> dict:
    return {"update_id": uid, kind: msg if msg is not None else message()}


def in_group(text: str | None = "hi all", **fields: Any) -> dict[str, Any]:
    fields.setdefault("sender", user(5, "Bob"))
    return update(message(text, chat_id=GROUP, chat_type="supergroup", **fields))


def inbound(raw: object, **kw: Any) -> InboundMessage | None:
    kw.setdefault("me", ME)
    return translate.inbound_message(raw, **kw)


def file(file_id: str, size: int | None = 100, **kw: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {"file_id": file_id, "file_unique_id": f"u-{file_id}", **kw}
    if size is not None:
        obj["file_size"] = size
    return obj


def entity(kind: str, offset: int, length: int, **kw: Any) -> dict[str, Any]:
    return {"type": kind, "offset": offset, "length": length, **kw}


TOPIC_ROOT = {
    "message_id": 10,
    "date": 0,
    "chat": {"id": -1001, "type": "supergroup", "is_forum": True},
    "from": user(7, "H"),
    "message_thread_id": 10,
    "forum_topic_created": {"name": "Ideas", "icon_color": 7322096},
}

# ----------------------------------------------------------------------------- inbound table

INBOUND = [
    pytest.param(
        update(message("hello there", sender=user(username="alice", last_name="Liddell"))),
        {},
        {
            "channel": "telegram",
            "chat_id": str(ALICE),
            "chat_type": "direct",
            "sender_id": str(ALICE),
            "sender_name": "Alice Liddell",
            "sender_username": "alice",
            "text": "hello there",
            "message_id": "7",
            "raw_id": str(UID),
            "timestamp": float(DATE),
            "thread_id": None,
            "reply_to_id": None,
            "reply_to_bot": False,
            "mentioned": False,
            "sender_is_bot": False,
            "chat_title": "",
            "account": "default",
            "group_kind": "group",
            "attachments": [],
        },
        id="dm",
    ),
    pytest.param(update(), {"account": "work"}, {"account": "work"}, id="account-name"),
    pytest.param(
        in_group(),
        {},
        {
            "chat_id": str(GROUP),
            "chat_type": "group",
            "chat_title": "Friends",
            "sender_id": "5",
            "sender_name": "Bob",
            "mentioned": False,
        },
        id="supergroup",
    ),
    pytest.param(
        update(message("x", chat_id=-5, chat_type="group")),
        {},
        {"chat_type": "group"},
        id="basic-group",
    ),
    pytest.param(
        update(message("x", chat_id=-1009, chat_type="channel")),
        {},
        {"chat_type": "group"},
        id="channel-chat-is-not-direct",
    ),
    # mentions
    pytest.param(in_group("hey @chela_bot what's up"), {}, {"mentioned": True}, id="at-username"),
    pytest.param(in_group("hey @CHELA_BOT!"), {}, {"mentioned": True}, id="at-username-case"),
    pytest.param(in_group("hey @chela_botty"), {}, {"mentioned": False}, id="longer-username"),
    pytest.param(in_group("mail x@chela_bot"), {}, {"mentioned": False}, id="inside-an-address"),
    pytest.param(
        in_group("hey @chela_bot"),
        {"me": Me(str(BOT_ID), "")},
        {"mentioned": False},
        id="username-unknown",
    ),
    pytest.param(
        in_group("🙂 @Chela_Bot hi", entities=[entity("mention", 3, 10)]),
        {},
        {"mentioned": True},
        id="mention-entity-after-emoji-utf16",
    ),
    pytest.param(
        in_group("Chela please", entities=[entity("text_mention", 0, 5, user=user(BOT_ID))]),
        {},
        {"mentioned": True},
        id="text-mention-of-the-bot",
    ),
    pytest.param(
        in_group("Bob please", entities=[entity("text_mention", 0, 3, user=user(99))]),
        {},
        {"mentioned": False},
        id="text-mention-of-someone-else",
    ),
    # commands
    pytest.param(
        in_group("/status@chela_bot", entities=[entity("bot_command", 0, 17)]),
        {},
        {"mentioned": True, "text": "/status@chela_bot"},
        id="command-addressed-to-the-bot",
    ),
    pytest.param(
        in_group("/status@other_bot", entities=[entity("bot_command", 0, 17)]),
        {},
        {"mentioned": False},
        id="command-addressed-to-another-bot",
    ),
    pytest.param(
        update(message("/new", entities=[entity("bot_command", 0, 4)])),
        {},
        {"text": "/new", "mentioned": False, "chat_type": "direct"},
        id="command-in-a-dm",
    ),
    # replies and threads
    pytest.param(
        in_group("answering you", reply_to_message=message("x", sender=user(BOT_ID, is_bot=True))),
        {},
        {"reply_to_id": "7", "reply_to_bot": True, "mentioned": False},
        id="reply-to-the-bot",
    ),
    pytest.param(
        in_group("answering a human", reply_to_message=message("x", message_id=3)),
        {},
        {"reply_to_id": "3", "reply_to_bot": False},
        id="reply-to-a-human",
    ),
    pytest.param(
        in_group(
            "in a topic", message_thread_id=10, is_topic_message=True, reply_to_message=TOPIC_ROOT
        ),
        {},
        {"thread_id": "10", "reply_to_id": None},
        id="forum-topic-root-is-not-a-reply",
    ),
    pytest.param(
        in_group(
            "reply in a topic",
            message_thread_id=10,
            is_topic_message=True,
            reply_to_message=message("x", message_id=12),
        ),
        {},
        {"thread_id": "10", "reply_to_id": "12"},
        id="reply-inside-a-topic",
    ),
    pytest.param(
        in_group("plain reply", message_thread_id=3, reply_to_message=message("x", message_id=3)),
        {},
        {"thread_id": None, "reply_to_id": "3"},
        id="reply-thread-outside-a-forum-is-not-a-topic",
    ),
    # senders
    pytest.param(
        in_group(
            "hi @chela_bot",
            sender=user(1087968824, "Group", is_bot=True, username="GroupAnonymousBot"),
            sender_chat={"id": GROUP, "type": "supergroup", "title": "G", "username": "gg"},
        ),
        {},
        {
            "sender_id": str(GROUP),
            "sender_name": "G",
            "sender_username": "gg",
            "sender_is_bot": False,
            "mentioned": True,
        },
        id="anonymous-admin-is-the-chat",
    ),
    pytest.param(
        in_group("beep", sender=user(31337, "Beep", is_bot=True)),
        {},
        {"sender_is_bot": True, "sender_id": "31337"},
        id="bot-sender",
    ),
    pytest.param(
        update({k: v for k, v in message("no from").items() if k != "from"}),
        {},
        {"sender_id": str(ALICE), "sender_name": ""},
        id="no-from-is-the-chat",
    ),
    pytest.param(
        update({k: v for k, v in message("no date").items() if k != "date"}),
        {},
        {"timestamp": 0.0},
        id="no-date",
    ),
    # captions and attachments
    pytest.param(
        in_group(
            None,
            caption="look @chela_bot",
            caption_entities=[entity("mention", 5, 10)],
            photo=[
                file("p-small", 10, width=90, height=90),
                file("p-big", 900, width=1280, height=960),
            ],
        ),
        {},
        {
            "text": "look @chela_bot",
            "mentioned": True,
            "attachments": [
                MediaItem("image", "", "photo_7.jpg", "image/jpeg", ref="p-big", size=900)
            ],
        },
        id="photo-largest-size-caption",
    ),
    pytest.param(
        update(
            message(
                None,
                caption="hi",
                caption_entities=[entity("text_mention", 0, 2, user=user(BOT_ID))],
                photo=[file("p", 5, width=1, height=1)],
            )
        ),
        {},
        {"mentioned": True},
        id="caption-entities",
    ),
    pytest.param(
        update(
            message(
                None,
                document=file(
                    "d1", 8, file_name="../../etc/report.pdf", mime_type="application/pdf"
                ),
            )
        ),
        {},
        {
            "text": "",
            "attachments": [
                MediaItem(
                    "document", "", "../../etc/report.pdf", "application/pdf", ref="d1", size=8
                )
            ],
        },
        id="document-name-kept-as-sent",
    ),
    pytest.param(
        update(message(None, document=file("d2", None, file_name="notes.txt"))),
        {},
        {"attachments": [MediaItem("document", "", "notes.txt", "text/plain", ref="d2")]},
        id="document-mime-guessed-from-name-size-unknown",
    ),
    pytest.param(
        update(message(None, document=file("d3"))),
        {},
        {"attachments": [MediaItem("document", "", "document_7", "", ref="d3", size=100)]},
        id="document-without-name-or-mime",
    ),
    pytest.param(
        update(
            message(
                None,
                animation=file("a1", file_name="cat.gif.mp4", mime_type="video/mp4"),
                document=file("a1", file_name="cat.gif.mp4", mime_type="video/mp4"),
            )
        ),
        {},
        {"attachments": [MediaItem("video", "", "cat.gif.mp4", "video/mp4", ref="a1", size=100)]},
        id="animation-once-as-video",
    ),
    pytest.param(
        update(message(None, video=file("v1", width=640, height=480, duration=1))),
        {},
        {"attachments": [MediaItem("video", "", "video_7.mp4", "video/mp4", ref="v1", size=100)]},
        id="video",
    ),
    pytest.param(
        update(message(None, video_note=file("vn", length=240, duration=2))),
        {},
        {
            "attachments": [
                MediaItem("video", "", "video_note_7.mp4", "video/mp4", ref="vn", size=100)
            ]
        },
        id="video-note",
    ),
    pytest.param(
        update(message(None, audio=file("au", duration=3, file_name="song.mp3"))),
        {},
        {"attachments": [MediaItem("audio", "", "song.mp3", "audio/mpeg", ref="au", size=100)]},
        id="audio",
    ),
    pytest.param(
        update(message(None, voice=file("vo", duration=2, mime_type="audio/ogg"))),
        {},
        {"attachments": [MediaItem("voice", "", "voice_7.ogg", "audio/ogg", ref="vo", size=100)]},
        id="voice",
    ),
    pytest.param(
        update(message(None, sticker=file("st", is_animated=False, is_video=False))),
        {},
        {
            "attachments": [
                MediaItem("image", "", "sticker_7.webp", "image/webp", ref="st", size=100)
            ]
        },
        id="still-sticker-is-an-image",
    ),
    pytest.param(
        update(
            message(
                "two",
                photo=[file("p", width=1, height=1)],
                voice=file("vo"),
                video=file("v"),
            )
        ),
        {},
        {"text": "two", "attachments": ["image", "video", "voice"]},
        id="several-attachments-in-order",
    ),
    pytest.param(
        update(message(None, photo=[file("ok", width=2, height=2), {"width": 9, "height": 9}])),
        {},
        {"attachments": [MediaItem("image", "", "photo_7.jpg", "image/jpeg", ref="ok", size=100)]},
        id="photo-size-without-file-id-left-out",
    ),
]


@pytest.mark.parametrize(("raw", "kw", "expected"), INBOUND)
def test_inbound(raw: dict[str, Any], kw: dict[str, Any], expected: dict[str, Any]) -> None:
    msg = inbound(raw, **kw)
    assert msg is not None
    got = {k: getattr(msg, k) for k in expected}
    if expected.get("attachments") and isinstance(expected["attachments"][0], str):
        got["attachments"] = [a.kind for a in msg.attachments]
    assert got == expected
    assert all(a.target == "" for a in msg.attachments)  # references only, never fetched


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param(update(message("edited"), kind="edited_message"), id="edited"),
        pytest.param(update(message("post"), kind="channel_post"), id="channel-post"),
        pytest.param({"update_id": 1, "callback_query": {"id": "1", "data": "x"}}, id="callback"),
        pytest.param({"update_id": 1, "something_new": {"x": 1}}, id="unknown-kind"),
        pytest.param({"update_id": 1, "message": "garbage"}, id="message-not-an-object"),
        pytest.param({"update_id": 1, "message": {"message_id": 1}}, id="no-chat"),
        pytest.param({"message": message()}, id="no-update-id"),
        pytest.param({"update_id": "1", "message": message()}, id="update-id-a-string"),
        pytest.param({"update_id": True, "message": message()}, id="update-id-a-bool"),
        pytest.param(update(message(None, new_chat_title="x")), id="service-message"),
        pytest.param(update(message("")), id="empty-text"),
        pytest.param(update(message(None, poll={"id": "1", "question": "?"})), id="poll"),
        pytest.param(
            update(message(None, sticker=file("st", is_animated=True, is_video=False))),
            id="animated-sticker",
        ),
        pytest.param(
            update(message(None, sticker=file("st", is_animated=False, is_video=True))),
            id="video-sticker",
        ),
        pytest.param(update(message("x", chat_id="42")), id="chat-id-not-a-number"),
        pytest.param(update(message("x", message_id="7")), id="message-id-not-a-number"),
        pytest.param(update(message("x", sender={"first_name": "A"})), id="from-without-id"),
        pytest.param(update(message("x", sender_chat={"title": "G"})), id="sender-chat-without-id"),
        pytest.param(None, id="none"),
        pytest.param([], id="a-list"),
    ],
)
def test_inbound_ignored(raw: object) -> None:
    assert inbound(raw) is None


def test_ignored_twins_pass_when_well_formed() -> None:
    # the same shapes as the refusals above, well formed, are delivered
    assert inbound(update(message("edited"))) is not None
    assert inbound(update(message("x", sender=user(9)))) is not None
    assert inbound(update(message(None, sticker=file("st")))) is not None
    assert inbound(update(message(None, document=file("d")))) is not None


def test_chat_without_type_is_dropped_not_guessed() -> None:
    raw = update(message("x"))
    assert inbound(raw) is not None
    del raw["message"]["chat"]["type"]
    assert inbound(raw) is None


# ----------------------------------------------------------------------------- fuzz

JUNK = [*fuzz.JUNK, "\ud83d"]  # the shared junk plus what matters to this platform


RICH = in_group(
    None,
    caption="🙂 @chela_bot /go@chela_bot",
    caption_entities=[
        entity("mention", 3, 10),
        entity("bot_command", 14, 13),
        entity("text_mention", 0, 2, user=user(BOT_ID)),
    ],
    sender_chat={"id": GROUP, "type": "supergroup", "title": "G"},
    is_topic_message=True,
    message_thread_id=10,
    reply_to_message={
        **message("x", message_id=3, sender=user(BOT_ID)),
        "forum_topic_created": {"name": "Ideas", "icon_color": 1},
    },
    media_group_id="album-1",
    photo=[file("p1", 5, width=90, height=90), file("p2", 50, width=900, height=900)],
    animation=file("an", file_name="a.mp4", mime_type="video/mp4", width=1, height=1, duration=1),
    document=file("doc", file_name="a.mp4"),
    video=file("v", width=640, height=480, duration=1),
    video_note=file("vn", length=240, duration=1),
    audio=file("au", file_name="s.mp3", mime_type="audio/mpeg", duration=3),
    voice=file("vo", mime_type="audio/ogg", duration=2),
    sticker=file("st", is_animated=False, is_video=False, width=512, height=512, type="regular"),
)


def test_malformed_fields_never_raise() -> None:
    """Every field of a rich update replaced by every kind of junk: the translator returns
    None or a message made of the right types, and never raises."""
    assert inbound(RICH) is not None
    cases = 0
    for path, junk in itertools.product(fuzz.paths(RICH), JUNK):
        raw = fuzz.replace(RICH, path, junk)
        msg = inbound(raw)
        key = translate.album_key(raw)
        cases += 1
        assert key is None or isinstance(key, str)
        if msg is None:
            continue
        assert isinstance(msg.text, str) and msg.chat_id.lstrip("-").isdigit()
        assert msg.sender_id.lstrip("-").isdigit() and msg.message_id.lstrip("-").isdigit()
        assert isinstance(msg.sender_name, str) and isinstance(msg.chat_title, str)
        assert isinstance(msg.sender_username, str) and isinstance(msg.mentioned, bool)
        assert msg.reply_to_id is None or msg.reply_to_id.lstrip("-").isdigit()
        assert msg.thread_id is None or msg.thread_id.lstrip("-").isdigit()
        assert isinstance(msg.timestamp, float) and msg.raw_id == str(raw["update_id"])
        for item in msg.attachments:
            assert isinstance(item.name, str) and item.name and isinstance(item.mime, str)
            assert isinstance(item.ref, str) and item.ref and isinstance(item.size, int)
            assert item.size >= 0 and item.target == ""
    assert cases > 1000


def test_rich_update_reads_every_part() -> None:
    # the fixture is a well-formed Bot API update: python-telegram-bot parses it too
    assert Update.de_json(copy.deepcopy(RICH), None).message is not None
    msg = inbound(RICH)
    assert msg is not None
    assert msg.sender_id == str(GROUP) and msg.mentioned and msg.thread_id == "10"
    assert msg.reply_to_id is None  # the topic's creation message is not a reply
    assert [a.ref for a in msg.attachments] == ["p2", "an", "v", "vn", "au", "vo", "st"]
    assert translate.album_key(RICH) == f"{GROUP}:album-1"


# ----------------------------------------------------------------------------- albums


def test_album_key_and_merge() -> None:
    parts = [
        update(message("two parts", photo=[file(f"p{i}")], media_group_id="g7"), uid=UID + i)
        for i in range(3)
    ]
    parts[1]["message"]["text"] = ""
    parts[2]["message"]["text"] = "@chela_bot"
    assert {translate.album_key(p) for p in parts} == {f"{ALICE}:g7"}
    assert translate.album_key(update(message("x"))) is None
    msgs = [inbound(p) for p in parts]
    merged = translate.merge_album([m for m in msgs if m is not None])
    assert merged.text == "two parts\n@chela_bot" and merged.mentioned
    assert [a.ref for a in merged.attachments] == ["p0", "p1", "p2"]
    assert merged.raw_id == str(UID) and merged.message_id == "7"


def test_update_id() -> None:
    assert translate.update_id({"update_id": 9}) == 9
    assert translate.update_id({"update_id": "9"}) is None
    assert translate.update_id("x") is None


# ----------------------------------------------------------------------------- outbound


def plan(limit: int = 4000, **kw: Any) -> translate.SendPlan:
    kw.setdefault("chat_id", "42")
    return translate.plan_send(OutboundMessage(**kw), limit=limit)


def reply(mid: int) -> dict[str, Any]:
    return {"reply_parameters": {"message_id": mid, "allow_sending_without_reply": True}}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(
            "**bold** & <things>",
            [
                ApiCall(
                    "sendMessage",
                    {
                        "chat_id": 42,
                        "text": "<b>bold</b> &amp; &lt;things&gt;",
                        "parse_mode": "HTML",
                    },
                )
            ],
            id="html-escaped",
        ),
        pytest.param(
            "see [x](https://e.com)",
            [
                ApiCall(
                    "sendMessage",
                    {
                        "chat_id": 42,
                        "text": 'see <a href="https://e.com">x</a>',
                        "parse_mode": "HTML",
                    },
                )
            ],
            id="link",
        ),
        pytest.param("", [], id="empty"),
        pytest.param("  \n ", [], id="blank"),
    ],
)
def test_text_and_formatting(text: str, expected: list[ApiCall]) -> None:
    assert plan(text=text).calls() == expected


def test_chat_id_forms() -> None:
    assert plan(chat_id="-100123", text="x").calls()[0].params["chat_id"] == -100123
    assert plan(chat_id="@mychannel", text="x").calls()[0].params["chat_id"] == "@mychannel"


@pytest.mark.parametrize("limit", [50, 100, 4000])
def test_chunking_at_the_limit(limit: int) -> None:
    text = "\n\n".join(("word " * 59 + "end.") for _ in range(30))
    calls = plan(limit, text=text).calls()
    assert len(calls) == {50: 180, 100: 90, 4000: 3}[limit]
    assert all(c.method == "sendMessage" and c.params["parse_mode"] == "HTML" for c in calls)
    assert all(len(c.params["text"]) <= limit for c in calls)
    assert " ".join(c.params["text"] for c in calls).split() == text.split()


def test_text_of_exactly_the_limit_is_one_message() -> None:
    assert len(plan(100, text="x" * 100).calls()) == 1
    assert len(plan(100, text="x" * 101).calls()) == 2


def test_plain_fallback_is_the_chunk_as_written_split_at_the_limit() -> None:
    step = translate.text_send(42, "a" * 25, limit=10, reply_to=5, thread_id=3)
    assert step.html is not None and step.html.params["parse_mode"] == "HTML"
    assert [c.params["text"] for c in step.plain] == ["a" * 10, "a" * 10, "a" * 5]
    assert [c.params.get("reply_parameters") for c in step.plain] == [
        reply(5)["reply_parameters"],
        None,
        None,
    ]
    assert all(
        "parse_mode" not in c.params and c.params["message_thread_id"] == 3 for c in step.plain
    )
    # blank pieces are left out
    spaced = translate.text_send(
        42, "a" * 10 + " " * 10 + "b", limit=10, reply_to=None, thread_id=None
    )
    assert [c.params["text"] for c in spaced.plain] == ["a" * 10, "b"]


def test_a_formatter_failure_sends_plain_text(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(md: str) -> str:
        raise ValueError("boom")

    monkeypatch.setattr(translate, "markdown_to_telegram_html", broken)
    step = translate.text_send(42, "**hi**", limit=4000, reply_to=None, thread_id=None)
    assert step.html is None and "boom" in step.render_error
    assert [c.params["text"] for c in step.plain] == ["**hi**"]
    assert plan(text="**hi**").calls() == [
        ApiCall("sendMessage", {"chat_id": 42, "text": "**hi**"})
    ]


@pytest.mark.parametrize(
    ("reason", "edit", "refused"),
    [
        (
            'Bad Request: can\'t parse entities: unsupported start tag "x" at byte offset 3',
            False,
            True,
        ),
        ("Bad Request: can't find end tag corresponding to start tag b", False, True),
        ("Bad Request: message is too long", False, True),
        ("Bad Request: unclosed start tag", False, False),
        ("Bad Request: unclosed start tag", True, True),
        ("Bad Request: chat not found", False, False),
        ("Bad Request: message to edit not found", True, False),
    ],
)
def test_html_refused(reason: str, edit: bool, refused: bool) -> None:
    assert translate.html_refused(reason, edit=edit) is refused


@pytest.mark.parametrize(
    ("mode", "expected"),
    [("first", [5, None, None]), ("all", [5, 5, 5]), ("off", [5, None, None])],
)
def test_reply_threading(mode: str, expected: list[int | None]) -> None:
    text = "\n\n".join("x" * 3000 for _ in range(3))
    calls = plan(text=text, reply_to_id="5", reply_mode=mode).calls()
    got = [c.params.get("reply_parameters", {}).get("message_id") for c in calls]
    assert got == expected
    assert calls[0].params["reply_parameters"] == reply(5)["reply_parameters"]


def test_reply_goes_to_the_first_step_that_delivers() -> None:
    p = plan(text="a\n\n" + "b" * 3999, reply_to_id="5", reply_mode="first")
    assert len(p.chunks) == 2
    # the first chunk failed: the second one carries the reply
    second = p.text_step(1, delivered=False)
    assert isinstance(second, TextSend) and second.html is not None
    assert second.html.params["reply_parameters"] == reply(5)["reply_parameters"]
    after = p.text_step(1, delivered=True)
    assert isinstance(after, TextSend) and after.html is not None
    assert "reply_parameters" not in after.html.params


def test_no_reply_without_an_id_and_thread_everywhere() -> None:
    calls = plan(
        text="\n\n".join("x" * 3000 for _ in range(2)),
        reply_mode="all",
        thread_id="10",
        media=[MediaItem("image", "https://example.com/a.png")],
    ).calls()
    assert [c.params.get("reply_parameters") for c in calls] == [None, None, None]
    assert [c.params["message_thread_id"] for c in calls] == [10, 10, 10]


def test_unusable_ids_are_left_out() -> None:
    [call] = plan(text="x", reply_to_id="abc", thread_id="t", edit_id="p").calls()
    assert call == ApiCall("sendMessage", {"chat_id": 42, "text": "x", "parse_mode": "HTML"})


# ----------------------------------------------------------------------------- media


def test_media_url_and_local(tmp_path: Path) -> None:
    img = tmp_path / "cat.png"
    p = plan(
        text="here you go",
        reply_to_id="1",
        media=[
            MediaItem("image", str(img)),
            MediaItem("image", "https://example.com/dog.jpg"),
            MediaItem("document", str(tmp_path / "notes.txt"), name="my notes.txt"),
            MediaItem("video", "https://example.com/v.mp4"),
            MediaItem("audio", "https://example.com/a.mp3"),
            MediaItem("voice", str(tmp_path / "v.ogg")),
        ],
    )
    calls = p.calls()
    assert [(c.method, c.params.get("reply_parameters")) for c in calls] == [
        ("sendMessage", reply(1)["reply_parameters"]),
        ("sendPhoto", None),
        ("sendPhoto", None),
        ("sendDocument", None),
        ("sendVideo", None),
        ("sendAudio", None),
        ("sendVoice", None),
    ]
    assert calls[1].params["photo"] == LocalFile(str(img), "cat.png")
    assert calls[1].upload == LocalFile(str(img), "cat.png")
    assert calls[2].params["photo"] == "https://example.com/dog.jpg" and calls[2].upload is None
    assert calls[3].params["document"] == LocalFile(str(tmp_path / "notes.txt"), "my notes.txt")
    assert not tmp_path.exists() or list(tmp_path.iterdir()) == []  # planning reads no disk


def test_media_only_replies_with_the_first() -> None:
    calls = plan(
        reply_to_id="1",
        reply_mode="first",
        media=[
            MediaItem("image", "https://e.com/1.png"),
            MediaItem("image", "https://e.com/2.png"),
        ],
    ).calls()
    assert [c.params.get("reply_parameters", {}).get("message_id") for c in calls] == [1, None]


def test_audio_as_voice() -> None:
    p = plan(
        audio_as_voice=True,
        media=[MediaItem("audio", "/tmp/clip.ogg"), MediaItem("audio", "https://e.com/a.mp3")],
    )
    assert [(c.method, list(c.params)[1]) for c in p.calls()] == [
        ("sendVoice", "voice"),
        ("sendVoice", "voice"),
    ]


@pytest.mark.parametrize(
    ("item", "note"),
    [
        (MediaItem("image", "https://example.com/dog.jpg"), "Image: https://example.com/dog.jpg"),
        (MediaItem("document", "https://example.com/a.pdf"), "Document: https://example.com/a.pdf"),
        (MediaItem("image", "/srv/x/nope.png"), "[attachment unavailable: nope.png]"),
        (MediaItem("image", "/srv/x/n.png", name="Nice.png"), "[attachment unavailable: Nice.png]"),
        (MediaItem("image", "/"), "[attachment unavailable: file]"),
    ],
)
def test_media_notes(item: MediaItem, note: str) -> None:
    step = translate.media_send(42, item, as_voice=False, limit=4000, reply_to=9, thread_id=None)
    assert [c.params["text"] for c in step.note] == [note]
    assert step.note[0].params["reply_parameters"] == reply(9)["reply_parameters"]
    assert "parse_mode" not in step.note[0].params


# ----------------------------------------------------------------------------- previews


def test_preview_is_edited_into_the_first_chunk() -> None:
    text = "**Hello**\n\n" + "y" * 3995
    p = plan(text=text, edit_id="77", reply_to_id="5", reply_mode="first")
    calls = p.calls()
    assert calls[0] == ApiCall(
        "editMessageText",
        {"chat_id": 42, "message_id": 77, "text": "<b>Hello</b>", "parse_mode": "HTML"},
    )
    # the preview counts as delivered: the next chunk is a new message without the reply
    assert calls[1].method == "sendMessage" and "reply_parameters" not in calls[1].params
    step = p.text_step(0, delivered=False)
    assert isinstance(step, PreviewEdit)
    assert step.plain == ApiCall(
        "editMessageText", {"chat_id": 42, "message_id": 77, "text": "**Hello**"}
    )
    assert step.delete == ApiCall("deleteMessage", {"chat_id": 42, "message_id": 77})
    # when the edit is refused, the chunk goes anew, with the reply
    assert step.fallback.html is not None
    assert step.fallback.html.params["reply_parameters"] == reply(5)["reply_parameters"]
    # only the first chunk replaces the preview
    assert isinstance(p.text_step(1, delivered=True), TextSend)


def test_preview_without_text_is_left_alone() -> None:
    assert plan(edit_id="77", media=[MediaItem("image", "https://e.com/1.png")]).calls() == [
        ApiCall("sendPhoto", {"chat_id": 42, "photo": "https://e.com/1.png"})
    ]


def test_preview_plain_edit_is_cut_at_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(translate, "markdown_to_telegram_html", lambda md: "  ")
    p = plan(limit=10, text="x" * 10, edit_id="3")
    step = p.text_step(0, delivered=False)
    assert isinstance(step, PreviewEdit) and step.html is None
    assert p.calls() == [
        ApiCall("editMessageText", {"chat_id": 42, "message_id": 3, "text": "x" * 10})
    ]


def test_preview_call_typing_and_reactions() -> None:
    assert translate.preview_call("42", "abcdef", limit=3, thread_id="10", reply_to_id="2") == (
        ApiCall(
            "sendMessage",
            {"chat_id": 42, "text": "abc", "message_thread_id": 10, **reply(2)},
        )
    )
    assert translate.typing_call("-1001", "10") == ApiCall(
        "sendChatAction", {"chat_id": -1001, "action": "typing", "message_thread_id": 10}
    )
    assert translate.typing_call("42") == ApiCall(
        "sendChatAction", {"chat_id": 42, "action": "typing"}
    )
    assert translate.reaction_call("42", "1", "👀") == ApiCall(
        "setMessageReaction",
        {"chat_id": 42, "message_id": 1, "reaction": [{"type": "emoji", "emoji": "👀"}]},
    )
    clear = translate.reaction_call("42", "1", "")
    assert clear is not None and clear.params["reaction"] == []
    assert translate.reaction_call("42", "abc", "👍") is None


# ----------------------------------------------------------------------------- purity

ALLOWED_IMPORTS = {
    "__future__",
    "collections.abc",
    "dataclasses",
    "mimetypes",  # the stdlib's table of types by file name
    "pathlib",
    "re",
    "typing",
    "channels.base",
    "channels.chunking",
    "channels.formatting",
    "channels.telegram.inbound",
}


@pytest.mark.parametrize("module", ["translate", "inbound"])
def test_the_translator_imports_no_io(module: str) -> None:
    path = Path(translate.__file__).with_name(f"{module}.py")
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    assert names, "the walk must see the module's imports"
    assert names <= ALLOWED_IMPORTS, names - ALLOWED_IMPORTS
