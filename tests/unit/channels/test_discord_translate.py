"""The Discord translators as tables: MESSAGE_CREATE payloads → InboundMessage,
OutboundMessage → planned calls.  Pure functions, no server, no event loop."""

from __future__ import annotations

import ast
import copy
import itertools
from pathlib import Path
from typing import Any

import pytest

from channels.base import InboundMessage, MediaItem, OutboundMessage
from channels.discord import translate
from channels.discord.translate import DELETE, EDIT, SEND, SEND_FILES, ApiCall
from tests import fuzz

BOT = 900000000000000001
ALICE = 111111111111111111
OTHER_BOT = 222222222222222222
GUILD = 333333333333333333
CHAN = 444444444444444444
THREAD = 555555555555555555
MID = 1177000000000000000  # a real-looking snowflake


def payload(content: Any = "hi", *, guild: bool = True, **extra: Any) -> dict[str, Any]:
    """A MESSAGE_CREATE ``d`` as the gateway sends it."""
    d: dict[str, Any] = {
        "id": str(MID),
        "channel_id": str(CHAN),
        "type": 0,
        "author": {"id": str(ALICE), "username": "alice", "global_name": "Alice", "bot": False},
        "content": content,
        "mentions": [],
        "attachments": [],
    }
    if guild:
        d["guild_id"] = str(GUILD)
    d.update(extra)
    return d


def inbound(d: Any, **state: Any) -> InboundMessage | None:
    state.setdefault("bot_id", BOT)
    return translate.inbound_message(d, **state)


def att(ctype: Any = "image/png", **extra: Any) -> dict[str, Any]:
    a = {
        "id": "1",
        "filename": "x.bin",
        "content_type": ctype,
        "url": "https://cdn.example/x.bin",
        "size": 42,
    }
    a.update(extra)
    return a


# ----------------------------------------------------------------------------- inbound


def test_direct_message() -> None:
    m = inbound(payload("hello", guild=False), account="work")
    assert m is not None
    assert (m.channel, m.account, m.chat_type, m.chat_id, m.thread_id) == (
        "discord",
        "work",
        "direct",
        str(CHAN),
        None,
    )
    assert (m.sender_id, m.sender_name, m.sender_username) == (str(ALICE), "Alice", "alice")
    assert (m.text, m.message_id, m.raw_id) == ("hello", str(MID), str(MID))
    assert not m.mentioned and not m.reply_to_bot and not m.sender_is_bot
    assert m.chat_title == "" and m.group_kind == "channel"
    # the id's timestamp: 1177000000000000000 >> 22 ms after the Discord epoch
    assert m.timestamp == ((MID >> 22) + 1_420_070_400_000) / 1000


def test_group_message_with_nick_and_title() -> None:
    d = payload("hey all", member={"nick": "Ally"})
    m = inbound(d, chat_title="#general")
    assert m is not None
    assert (m.chat_type, m.chat_id, m.chat_title, m.sender_name) == (
        "group",
        str(CHAN),
        "#general",
        "Ally",
    )
    assert not m.mentioned


@pytest.mark.parametrize(
    ("content", "mentions", "expected"),
    [
        (f"<@{BOT}> hi", [], True),
        (f"<@!{BOT}> hi", [], True),
        ("hi", [{"id": str(BOT)}], True),
        ("hi", [{"id": str(ALICE)}], False),
        (f"<@{ALICE}> hi", [{"id": str(ALICE)}], False),
        (f"<@{BOT}1> hi", [], False),  # another id that starts like ours
        ("hi", ["junk", None, {"id": None}], False),
    ],
)
def test_mentions(content: str, mentions: list[Any], expected: bool) -> None:
    m = inbound(payload(content, mentions=mentions))
    assert m is not None and m.mentioned is expected
    assert m.text == content  # passed as written


def test_no_bot_id_means_no_mention() -> None:
    m = inbound(payload("<@0> hi", mentions=[{"id": "0"}]), bot_id=0)
    assert m is not None and not m.mentioned


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ({}, False),  # no reference
        ({"message_reference": {"message_id": "7", "channel_id": str(CHAN)}}, None),
        (
            {
                "message_reference": {"message_id": "7"},
                "referenced_message": {"author": {"id": str(BOT)}},
            },
            True,
        ),
        (
            {
                "message_reference": {"message_id": "7"},
                "referenced_message": {"author": {"id": str(ALICE)}},
            },
            False,
        ),
        ({"message_reference": {"message_id": "7"}, "referenced_message": None}, False),
        ({"message_reference": {"message_id": "x"}, "referenced_message": None}, False),
    ],
)
def test_reply_to_bot_decided_from_the_payload(extra: dict[str, Any], expected: Any) -> None:
    assert translate.reply_to_bot(payload(**extra), BOT) is expected


def test_reply_fields() -> None:
    d = payload(message_reference={"message_id": "7", "channel_id": "8"})
    m = inbound(d, reply_to_bot=True)
    assert m is not None and (m.reply_to_id, m.reply_to_bot) == ("7", True)
    assert translate.referenced_channel(d) == 8
    assert translate.referenced_channel(payload(message_reference={"message_id": "7"})) == CHAN
    plain = inbound(payload())
    assert plain is not None and (plain.reply_to_id, plain.reply_to_bot) == (None, False)


def test_thread_message() -> None:
    d = payload("in thread", channel_id=str(THREAD))
    m = inbound(d, parent_id=CHAN, chat_title="#general › plans")
    assert m is not None
    assert (m.chat_id, m.thread_id, m.chat_title) == (str(CHAN), str(THREAD), "#general › plans")


@pytest.mark.parametrize(
    ("name", "is_dm", "thread", "parent", "title"),
    [
        ("general", False, False, None, "#general"),
        (None, False, False, None, ""),
        ("", False, False, None, ""),
        ("plans", False, True, "general", "#general › plans"),
        ("plans", False, True, None, "#plans"),
        ("general", True, False, None, ""),
    ],
)
def test_channel_title(name: Any, is_dm: bool, thread: bool, parent: Any, title: str) -> None:
    assert translate.channel_title(name, is_dm=is_dm, thread=thread, parent_name=parent) == title


def test_own_and_system_messages_are_dropped_other_bots_flagged() -> None:
    own = payload(author={"id": str(BOT), "username": "chela", "bot": True})
    assert inbound(own) is None
    assert not translate.is_chat_message(own, BOT)
    for kind in (1, 6, 7, 18, 21, True, "0", None):  # joins, pins, thread-created, junk
        assert inbound(payload(type=kind)) is None, kind
    assert inbound(payload(type=19)) is not None  # a reply
    other = inbound(payload(author={"id": str(OTHER_BOT), "username": "b", "bot": True}))
    assert other is not None and other.sender_is_bot and other.sender_name == "b"


@pytest.mark.parametrize(
    ("attachment", "kind", "mime"),
    [
        (att("image/png"), "image", "image/png"),
        (att("video/mp4"), "video", "video/mp4"),
        (att("audio/mpeg"), "audio", "audio/mpeg"),
        (att("audio/ogg", duration_secs=3.2, waveform="AAAA"), "voice", "audio/ogg"),
        (att("audio/ogg", duration_secs=3.2), "audio", "audio/ogg"),
        (att("application/pdf"), "document", "application/pdf"),
        (att("text/plain; charset=utf-8"), "document", "text/plain"),
        (att(None), "document", ""),
    ],
)
def test_each_attachment_kind_is_a_ref(attachment: dict[str, Any], kind: str, mime: str) -> None:
    m = inbound(payload("", attachments=[attachment]))
    assert m is not None
    assert m.attachments == [
        MediaItem(
            kind=kind,  # type: ignore[arg-type]
            target="",
            name="x.bin",
            mime=mime,
            ref="https://cdn.example/x.bin",
            size=42,
        )
    ]


def test_bad_attachment_entries_are_skipped() -> None:
    m = inbound(payload(attachments=[None, "x", att(size=-5), att(size="big")]))
    assert m is not None
    assert [a.size for a in m.attachments] == [0, 0]


def test_commands_pass_through_as_text() -> None:
    # slash-style commands are handled by the core: the adapter passes the text as written
    for text in ("/new", "/model gpt", "/help@chela"):
        m = inbound(payload(text, guild=False))
        assert m is not None and m.text == text and m.chat_type == "direct"


@pytest.mark.parametrize(
    "bad",
    [
        None,
        "junk",
        [],
        {},
        payload(id=None),
        payload(id="abc"),
        payload(id="0"),
        payload(channel_id=None),
        payload(channel_id="-4"),
        payload(author=None),
        payload(author={"id": None}),
        payload(author={"id": "1e5"}),
    ],
)
def test_malformed_updates_are_ignored(bad: Any) -> None:
    assert inbound(bad) is None


JUNK = [*fuzz.JUNK, "٣", "<@!", 2**70]


def test_fuzz_malformed_fields_never_raise() -> None:
    rich = payload(
        f"<@{BOT}> look",
        member={"nick": "Ally"},
        mentions=[{"id": str(BOT)}, {"id": str(ALICE)}],
        message_reference={"message_id": "7", "channel_id": str(CHAN)},
        referenced_message={"author": {"id": str(BOT)}},
        attachments=[att("audio/ogg", duration_secs=1, waveform="AA"), att("image/png")],
    )
    count = 0
    for path, junk in itertools.product(fuzz.paths(rich), JUNK):
        doc = fuzz.replace(rich, path, junk)
        msg = inbound(doc, parent_id=CHAN)
        assert msg is None or isinstance(msg, InboundMessage)
        translate.reply_to_bot(doc, BOT)
        translate.referenced_channel(doc)
        count += 1
    assert count > 300


# ----------------------------------------------------------------------------- outbound


def out(text: str = "", **kw: Any) -> OutboundMessage:
    return OutboundMessage(chat_id=str(CHAN), text=text, **kw)


def plan(msg: OutboundMessage, **kw: Any) -> list[ApiCall]:
    kw.setdefault("channel_id", CHAN)
    return translate.plan_send(msg, **kw)


def send(content: str, reference: int | None = None, nonce: str | None = None) -> ApiCall:
    return translate.send_call(CHAN, content, reference, nonce)


def test_short_text_is_one_message() -> None:
    assert plan(out("hello **there**")) == [send("hello **there**")]
    assert plan(out("   \n")) == []


def test_chunking_at_the_limit() -> None:
    exact = "a" * 2000
    assert plan(out(exact), max_lines=100) == [send(exact)]
    calls = plan(out("word " * 1000), max_lines=100)  # 5000 characters
    assert len(calls) == 3
    assert all(c.method == SEND and len(c.params["content"]) <= 2000 for c in calls)
    # a configured limit above Discord's is capped at 2000
    assert all(
        len(c.params["content"]) <= 2000
        for c in plan(out("word " * 1000), chunk_limit=9000, max_lines=100)
    )
    small = plan(out("word " * 100), chunk_limit=100)
    assert len(small) > 4 and all(len(c.params["content"]) <= 100 for c in small)


def test_tall_text_split_by_lines() -> None:
    calls = plan(out("\n".join(f"line {i}" for i in range(40))), max_lines=17)
    assert len(calls) == 3


def test_markdown_code_fence_balanced_across_chunks() -> None:
    text = "```python\n" + "\n".join(f"x = {i}" for i in range(60)) + "\n```"
    calls = plan(out(text), max_lines=17)
    assert len(calls) > 1
    for c in calls:
        assert c.params["content"].count("```") % 2 == 0


@pytest.mark.parametrize(
    ("mode", "refs"),
    [("first", [7, None, None]), ("all", [7, 7, 7])],
)
def test_reply_threading(mode: str, refs: list[Any]) -> None:
    calls = plan(out("word " * 1000, reply_to_id="7", reply_mode=mode), max_lines=100)
    assert [c.params["reference"] for c in calls] == refs


def test_non_numeric_reply_id_is_ignored() -> None:
    assert plan(out("hi", reply_to_id="abc")) == [send("hi")]
    assert translate.reply_reference("abc") is None
    assert translate.reply_reference("12") == 12


def test_nonces_are_stable_per_index() -> None:
    key = "k" * 30
    calls = plan(out("word " * 1000, idempotency_key=key), max_lines=100)
    assert [c.params["nonce"] for c in calls] == [f"{'k' * 20}.{i}" for i in range(3)]
    assert plan(out("hi", idempotency_key=key)) == plan(out("hi", idempotency_key=key))


def test_media(tmp_path: Path) -> None:
    files = [tmp_path / f"f{i}.png" for i in range(12)]
    media = [MediaItem(kind="image", target=str(f)) for f in files]
    media.append(MediaItem(kind="document", target=str(tmp_path / "gone.pdf"), name="gone.pdf"))
    media.append(MediaItem(kind="image", target="https://example.com/a.png"))
    msg = out("see", media=media, reply_to_id="7", idempotency_key="key")
    calls = plan(msg, local_files={str(f) for f in files})
    assert [c.method for c in calls] == [SEND, SEND_FILES, SEND_FILES, SEND]
    assert calls[0] == send("see", 7, "key.0")
    first, second = calls[1], calls[2]
    assert first.params["files"] == [(str(f), f.name) for f in files[:10]]
    assert second.params["files"] == [(str(f), f.name) for f in files[10:]]
    assert (first.params["reference"], first.params["nonce"]) == (None, "key.1")
    # an upload that fails becomes a note, with its own nonce
    assert first.fallback == (
        send("\n".join(f"[attachment unavailable: {f.name}]" for f in files[:10]), None, "key.1n"),
    )
    assert calls[3] == send(
        "[attachment unavailable: gone.pdf]\nhttps://example.com/a.png", None, "key.3"
    )


def test_media_only_carries_the_reference() -> None:
    item = MediaItem(kind="image", target="/tmp/a.png", name="pic.png")
    calls = plan(out("", media=[item], reply_to_id="7"), local_files={"/tmp/a.png"})
    assert [c.method for c in calls] == [SEND_FILES]
    assert calls[0].params["files"] == [("/tmp/a.png", "pic.png")]
    assert calls[0].params["reference"] == 7


def test_preview_edit_into_the_first_chunk() -> None:
    calls = plan(out("word " * 1000, edit_id="99", idempotency_key="k"), max_lines=100)
    assert [c.method for c in calls] == [EDIT, SEND, SEND]
    edit = calls[0]
    target = {"channel_id": CHAN, "message_id": 99}
    assert edit.params == {**target, "content": edit.params["content"]}
    assert edit.fallback == (ApiCall(DELETE, target), send(edit.params["content"], None, "k.0"))
    assert calls[1].params["nonce"] == "k.1"


def test_preview_with_media_only_is_not_edited() -> None:
    item = MediaItem(kind="image", target="https://example.com/a.png")
    calls = plan(out("", media=[item], edit_id="99"))
    assert [c.method for c in calls] == [EDIT]  # the URL line is text: it replaces the preview
    assert plan(out("hi", edit_id="abc")) == [send("hi")]  # names no message


def test_preview_calls() -> None:
    assert translate.preview_send(CHAN, "x" * 3000, limit=2000, reply_to_id="7") == send(
        "x" * 2000, 7
    )
    assert translate.preview_send(CHAN, "hi", limit=2000, reply_to_id="٣") == send("hi")
    assert translate.preview_edit(CHAN, 5, "y" * 3000, limit=100).params == {
        "channel_id": CHAN,
        "message_id": 5,
        "content": "y" * 100,
    }


def test_plan_does_not_mutate_its_input() -> None:
    msg = out("hi", media=[MediaItem(kind="image", target="https://e.com/a")])
    before = copy.deepcopy(msg)
    plan(msg)
    assert msg == before


def test_translate_is_pure() -> None:
    """No I/O, asyncio or network library in the translators."""
    source = Path(translate.__file__).read_text()
    imported = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            imported |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module.split(".")[0])
    assert not imported & {"asyncio", "discord", "aiohttp", "os", "socket", "requests", "bot"}


def test_chunk_cuts_keep_indentation_and_drop_trailing_spaces() -> None:
    """docs/channels.md, "Discord chunk whitespace": the break is consumed, the next chunk's
    indentation is kept (inside a code block it is content), no chunk ends in spaces, and
    chunks of whitespace only are never sent."""
    code = "```py\n" + "".join(f"    x{i} = {i}   \n" for i in range(30)) + "```"
    parts = translate.chunks(code, 2000, 17)
    assert len(parts) == 2
    assert all(line.startswith("    x") for p in parts for line in p.splitlines()[1:-1])
    assert not any(p != p.rstrip() for p in parts)
    assert [p.splitlines()[0] for p in parts] == ["```py", "```py"]
    prose = "first paragraph   \n\n \n\n   \n\nsecond"
    assert translate.chunks(prose, 20, 17) == ["first paragraph", "second"]
    assert translate.chunks(" \n\t\n ", 2000, 17) == []
