"""The Signal translators as tables: envelopes → InboundMessage, OutboundMessage → ``send``
params.  Pure functions, no server, no event loop."""

from __future__ import annotations

import ast
import copy
import itertools
from pathlib import Path
from typing import Any

import pytest

from tests import fuzz
from channels.base import ChannelError, InboundMessage, MediaItem, OutboundMessage
from channels.signal import translate
from channels.signal.translate import Me

BOT = "+15550000000"
BOT_UUID = "b0b0b0b0-0000-4000-8000-000000000000"
ALICE = "+15550001111"
ALICE_UUID = "a1a1a1a1-1111-4111-8111-111111111111"
BOB = "+15550002222"
BOB_UUID = "b2b2b2b2-2222-4222-8222-222222222222"
GROUP = "Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MGFiY2RlZmdoaWo="
TS = 1_700_000_000_123
ME = Me(BOT)
ME_FULL = Me(BOT, BOT_UUID)


def envelope(
    text: str | None = "hi",
    *,
    number: str | None = ALICE,
    uuid: str = ALICE_UUID,
    name: str = "Alice",
    ts: Any = TS,
    **data: Any,
) -> dict[str, Any]:
    """A signal-cli ``receive`` envelope with a data message, as the daemon sends it."""
    dm: dict[str, Any] = {"timestamp": ts, "message": text, "expiresInSeconds": 0}
    dm.update(data)
    return {
        "source": number or uuid,
        "sourceNumber": number,
        "sourceUuid": uuid,
        "sourceName": name,
        "sourceDevice": 1,
        "timestamp": ts,
        "serverReceivedTimestamp": TS + 5,
        "dataMessage": dm,
    }


def in_group(env: dict[str, Any], group_id: Any = GROUP, **info: Any) -> dict[str, Any]:
    env["dataMessage"]["groupInfo"] = {"groupId": group_id, "type": "DELIVER", **info}
    return env


def mention(start: Any, length: Any = 1, **who: Any) -> dict[str, Any]:
    return {"start": start, "length": length, **who}


def inbound(env: object, **kw: Any) -> InboundMessage | None:
    kw.setdefault("me", ME)
    return translate.inbound_message(env, **kw)


# ----------------------------------------------------------------------------- inbound table

INBOUND = [
    pytest.param(
        envelope("hello there"),
        {},
        {
            "channel": "signal",
            "chat_id": ALICE,
            "chat_type": "direct",
            "sender_id": ALICE,
            "sender_name": "Alice",
            "text": "hello there",
            "message_id": str(TS),
            "raw_id": f"{ALICE}:{TS}",
            "timestamp": TS / 1000,
            "mentioned": False,
            "reply_to_id": None,
            "chat_title": "",
            "account": "default",
            "group_kind": "group",
        },
        id="dm-by-number",
    ),
    pytest.param(
        envelope("hidden", number=None),
        {"account_name": "main"},
        {"chat_id": ALICE_UUID, "sender_id": ALICE_UUID, "chat_type": "direct", "account": "main"},
        id="dm-number-hidden-uses-uuid",
    ),
    pytest.param(
        in_group(envelope("hi all"), groupName="Fam"),
        {},
        {"chat_id": GROUP, "chat_type": "group", "chat_title": "Fam", "sender_id": ALICE},
        id="group",
    ),
    pytest.param(
        {
            **envelope("v2"),
            "dataMessage": {
                "timestamp": TS,
                "message": "v2",
                "groupV2": {"groupId": GROUP, "name": "Team"},
            },
        },
        {},
        {"chat_id": GROUP, "chat_type": "group", "chat_title": "Team"},
        id="group-v2-form",
    ),
    pytest.param(
        in_group(envelope("\ufffc what's up", mentions=[mention(0, name="Chela", number=BOT)])),
        {},
        {"text": "@Chela what's up", "mentioned": True},
        id="mention-of-bot-by-number",
    ),
    pytest.param(
        in_group(envelope("hi \ufffc!", mentions=[mention(3, name="Chela", uuid=BOT_UUID)])),
        {"me": ME_FULL},
        {"text": "hi @Chela!", "mentioned": True},
        id="mention-of-bot-by-uuid",
    ),
    pytest.param(
        in_group(envelope("hi \ufffc!", mentions=[mention(3, name="Chela", uuid=BOT_UUID)])),
        {},
        {"text": "hi @Chela!", "mentioned": False},
        id="mention-by-unknown-uuid-is-not-the-bot",
    ),
    pytest.param(
        in_group(envelope("😀 ping \ufffc", mentions=[mention(8, number=BOB, uuid=BOB_UUID)])),
        {},
        # the emoji is two UTF-16 units: offset 8 is the placeholder at Python index 7
        {"text": f"😀 ping @{BOB}", "mentioned": False},
        id="mention-utf16-offset-after-emoji",
    ),
    pytest.param(
        in_group(
            envelope(
                "\ufffc 👋🏽 \ufffc and 𝄞 \ufffc",
                mentions=[
                    mention(0, name="Bob", number=BOB),
                    mention(7, uuid=ALICE_UUID),
                    mention(16, name="@Chela", number=BOT),
                ],
            )
        ),
        {},
        {"text": "@Bob 👋🏽 @a1a1a1a1 and 𝄞 @Chela", "mentioned": True},
        id="three-mentions-around-astral-characters",
    ),
    pytest.param(
        in_group(envelope("\ufffc hi", mentions=[mention("x", name="Chela", number=BOT)])),
        {},
        {"text": "@ hi", "mentioned": True},
        id="mention-with-bad-offset-still-counts",
    ),
    pytest.param(
        in_group(envelope("\ufffc hi", mentions=[mention(5, name="Bob", number=BOB)])),
        {},
        {"text": "@ hi", "mentioned": False},
        id="mention-offset-past-the-text",
    ),
    pytest.param(
        in_group(
            envelope("yes", quote={"id": 111, "author": BOT, "authorNumber": BOT, "text": "q?"})
        ),
        {},
        {"reply_to_id": "111", "reply_to_bot": True},
        id="quote-of-the-bot",
    ),
    pytest.param(
        in_group(envelope("yes", quote={"id": 222, "authorUuid": BOT_UUID, "text": "q?"})),
        {"own_sent": {222}},
        {"reply_to_id": "222", "reply_to_bot": True},
        id="quote-of-a-sent-timestamp",
    ),
    pytest.param(
        in_group(envelope("yes", quote={"id": 333, "author": BOB, "text": "x"})),
        {"own_sent": {222}},
        {"reply_to_id": "333", "reply_to_bot": False},
        id="quote-of-someone-else",
    ),
    pytest.param(
        in_group(
            envelope(
                "\ufffc yes",
                mentions=[mention(0, name="Chela", uuid=BOT_UUID)],
                quote={"id": 444, "authorNumber": BOT, "authorUuid": BOT_UUID},
            )
        ),
        {},
        # the quote reveals the bot's uuid, which then identifies the uuid-only mention
        {"reply_to_bot": True, "mentioned": True},
        id="own-uuid-learned-from-the-envelope",
    ),
    pytest.param(
        envelope(
            "look",
            attachments=[
                {"id": "a1.png", "contentType": "image/png", "filename": "cat.png", "size": 8},
                {"id": "v.ogg", "contentType": "audio/ogg", "voiceNote": True, "size": "12"},
                {"id": "m.mp3", "contentType": "audio/mpeg"},
                {"id": "c.mp4", "contentType": "video/mp4", "size": -4},
                {"storedFilename": "/var/signal/att/doc", "id": "doc", "contentType": ""},
            ],
        ),
        {},
        {
            "attachments": [
                MediaItem("image", "", name="cat.png", mime="image/png", ref="a1.png", size=8),
                MediaItem("voice", "", name="v.ogg", mime="audio/ogg", ref="v.ogg", size=12),
                MediaItem("audio", "", name="m.mp3", mime="audio/mpeg", ref="m.mp3"),
                MediaItem("video", "", name="c.mp4", mime="video/mp4", ref="c.mp4"),
                MediaItem("document", "", name="doc", ref="/var/signal/att/doc"),
            ],
            "text": "look",
        },
        id="attachments-are-refs",
    ),
    pytest.param(
        envelope("", attachments=[{"contentType": "image/png", "filename": "lost.png"}]),
        {},
        {"attachments": [], "text": "[attachment unavailable: lost.png]"},
        id="attachment-without-ref-becomes-a-note",
    ),
    pytest.param(
        envelope(None, attachments=[{"id": "x", "contentType": "application/pdf"}]),
        {},
        {
            "text": "",
            "attachments": [MediaItem("document", "", name="x", mime="application/pdf", ref="x")],
        },
        id="attachment-only",
    ),
    pytest.param(
        {**envelope("late"), "timestamp": None},
        {},
        {"message_id": str(TS), "raw_id": f"{ALICE}:{TS}", "timestamp": TS / 1000},
        id="envelope-timestamp-missing-uses-the-message-one",
    ),
    pytest.param(
        {**envelope("x", ts="garbage"), "timestamp": TS},
        {},
        {"message_id": str(TS), "raw_id": f"{ALICE}:{TS}"},
        id="garbage-message-timestamp-falls-back",
    ),
]


@pytest.mark.parametrize(("env", "kw", "expected"), INBOUND)
def test_inbound(env: dict[str, Any], kw: dict[str, Any], expected: dict[str, Any]) -> None:
    before = copy.deepcopy(env)
    msg = inbound(env, **kw)
    assert msg is not None
    assert {k: getattr(msg, k) for k in expected} == expected
    assert env == before  # the envelope is not touched


IGNORED = [
    pytest.param(
        {
            **envelope(),
            "dataMessage": None,
            "receiptMessage": {"when": TS, "isDelivery": True, "timestamps": [1]},
        },
        id="receipt",
    ),
    pytest.param(
        {**envelope(), "dataMessage": None, "typingMessage": {"action": "STARTED"}}, id="typing"
    ),
    pytest.param(
        {**envelope(), "dataMessage": None, "syncMessage": {"sentMessage": {"message": "x"}}},
        id="sync",
    ),
    pytest.param(
        envelope(None, reaction={"emoji": "👍", "targetAuthor": BOT, "targetSentTimestamp": 9}),
        id="reaction",
    ),
    pytest.param(envelope(None, remoteDelete={"timestamp": 9}), id="remote-delete"),
    pytest.param(in_group(envelope(None, groupV2Change=True)), id="group-change"),
    pytest.param(envelope("me", number=BOT, uuid=BOT_UUID), id="own-message-by-number"),
    pytest.param(envelope("me", number=None, uuid=BOT_UUID), id="own-message-by-uuid"),
    pytest.param(envelope("   "), id="blank-text"),
    pytest.param(envelope(None), id="no-text-no-attachments"),
    pytest.param(envelope("x", number=None, uuid=""), id="no-sender"),
    pytest.param(envelope("x", ts="garbage"), id="garbage-timestamps"),
    pytest.param(envelope("x", ts=float("nan")), id="nan-timestamps"),
    pytest.param(envelope("x", ts=True), id="bool-timestamps"),
    pytest.param(in_group(envelope("x"), group_id=12345), id="group-id-not-a-string"),
    pytest.param({**envelope(), "dataMessage": "hi"}, id="data-message-not-an-object"),
    pytest.param(["not", "an", "envelope"], id="not-an-object"),
    pytest.param(None, id="null"),
]


@pytest.mark.parametrize("env", IGNORED)
def test_inbound_ignored(env: object) -> None:
    assert inbound(env, me=ME_FULL) is None


def test_ignored_own_message_twin_from_someone_else() -> None:
    # the same envelope shape from another sender is a message: the ignoring is about the bot
    assert inbound(envelope("me", number=BOB, uuid=BOB_UUID), me=ME_FULL) is not None


JUNK = [*fuzz.JUNK, "\ufffc"]  # the shared junk plus what matters to this platform


def test_malformed_fields_never_raise() -> None:
    """Every field of a rich envelope replaced by every kind of junk: the translator
    returns None or a message made of the right types, and never raises."""
    rich = in_group(
        envelope(
            "\ufffc 😀 \ufffc",
            mentions=[mention(0, name="Chela", number=BOT, uuid=BOT_UUID), mention(5, number=BOB)],
            quote={
                "id": 7,
                "author": BOT,
                "authorNumber": BOT,
                "authorUuid": BOT_UUID,
                "text": "q",
            },
            attachments=[
                {
                    "id": "a.png",
                    "contentType": "image/png",
                    "filename": "a.png",
                    "size": 3,
                    "voiceNote": False,
                }
            ],
        ),
        groupName="Fam",
    )
    assert inbound(rich) is not None
    cases = 0
    for path, junk in itertools.product(fuzz.paths(rich), JUNK):
        msg = inbound(fuzz.replace(rich, path, junk), own_sent={7})
        cases += 1
        if msg is None:
            continue
        assert isinstance(msg.text, str) and isinstance(msg.chat_id, str) and msg.chat_id
        assert isinstance(msg.sender_id, str) and msg.sender_id
        assert isinstance(msg.sender_name, str) and isinstance(msg.chat_title, str)
        assert msg.message_id.lstrip("-").replace(".", "", 1).isdigit()
        assert msg.reply_to_id is None or isinstance(msg.reply_to_id, str)
        for item in msg.attachments:
            assert isinstance(item.name, str) and isinstance(item.mime, str)
            assert isinstance(item.ref, str) and item.ref and isinstance(item.size, int)
    assert cases > 500


def test_inbound_does_not_read_the_disk(tmp_path: Path) -> None:
    # an attachment id naming a file that exists is still only a reference
    (tmp_path / "real.bin").write_bytes(b"x")
    msg = inbound(envelope("", attachments=[{"id": str(tmp_path / "nope.bin")}]))
    assert msg is not None and msg.attachments[0].ref == str(tmp_path / "nope.bin")


# ----------------------------------------------------------------------------- events


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        ({"envelope": {"a": 1}, "account": BOT}, {"a": 1}),
        ({"envelope": {"a": 1}}, {"a": 1}),
        ({"envelope": {"a": 1}, "account": BOT_UUID}, {"a": 1}),
        (
            {
                "jsonrpc": "2.0",
                "method": "receive",
                "params": {"envelope": {"a": 2}, "account": BOT},
            },
            {"a": 2},
        ),
        ({"jsonrpc": "2.0", "id": 1, "result": {"envelope": {"a": 3}}}, {"a": 3}),
        ({"envelope": {"a": 1}, "account": "+19999999999"}, None),
        ({"envelope": "x"}, None),
        ({"exception": {"message": "boom"}}, None),
        ("string", None),
        ([{"envelope": {}}], None),
    ],
)
def test_event_unwrapping(payload: object, expected: dict[str, Any] | None) -> None:
    unwrapped = translate.unwrap_event(payload)
    got = translate.envelope_for(unwrapped, ME_FULL) if unwrapped is not None else None
    assert got == expected


def test_dedupe_key_and_own_uuid() -> None:
    assert translate.dedupe_key(envelope()) == (ALICE, TS)
    assert translate.dedupe_key(envelope(number=None)) == (ALICE_UUID, TS)
    odd = {**envelope(), "sourceNumber": ["x"], "timestamp": {"t": 1}}
    assert hash(translate.dedupe_key(odd)) == hash(("['x']", "{'t': 1}"))
    by_mention = envelope("\ufffc", mentions=[mention(0, number=BOT, uuid=BOT_UUID)])
    by_quote = envelope("x", quote={"id": 1, "authorNumber": BOT, "authorUuid": BOT_UUID})
    assert translate.own_uuid_in(by_mention, BOT) == BOT_UUID
    assert translate.own_uuid_in(by_quote, BOT) == BOT_UUID
    # someone else's number with a uuid teaches nothing
    other = envelope("\ufffc", mentions=[mention(0, number=BOB, uuid=BOB_UUID)])
    assert translate.own_uuid_in(other, BOT) == ""
    assert translate.own_uuid_in({"dataMessage": {"mentions": "junk", "quote": []}}, BOT) == ""


# ----------------------------------------------------------------------------- outbound table


def plan(msg: OutboundMessage, **kw: Any) -> translate.SendPlan:
    kw.setdefault("me", ME)
    kw.setdefault("chunk_limit", 4000)
    kw.setdefault("chat_kinds", {})
    kw.setdefault("authors", {})
    return translate.plan_send(msg, **kw)


@pytest.mark.parametrize(
    ("chat_id", "kinds", "clean", "target"),
    [
        (ALICE, {}, ALICE, {"recipient": [ALICE]}),
        (ALICE_UUID, {}, ALICE_UUID, {"recipient": [ALICE_UUID]}),
        ("PNI:" + ALICE_UUID, {}, "PNI:" + ALICE_UUID, {"recipient": ["PNI:" + ALICE_UUID]}),
        (GROUP, {}, GROUP, {"groupId": GROUP}),
        ("+Zm9v/YmFy=", {}, "+Zm9v/YmFy=", {"groupId": "+Zm9v/YmFy="}),  # base64 may start with +
        ("group:" + GROUP, {}, GROUP, {"groupId": GROUP}),
        ("group:" + ALICE, {}, ALICE, {"groupId": ALICE}),
        ("direct:" + ALICE, {}, ALICE, {"recipient": [ALICE]}),
        ("direct:" + GROUP, {GROUP: "group"}, GROUP, {"recipient": [GROUP]}),
        (GROUP, {GROUP: "direct"}, GROUP, {"recipient": [GROUP]}),  # seen inbound wins
        (ALICE, {ALICE: "group"}, ALICE, {"groupId": ALICE}),
    ],
)
def test_send_targets(
    chat_id: str, kinds: dict[str, str], clean: str, target: dict[str, Any]
) -> None:
    p = plan(OutboundMessage(chat_id=chat_id, text="hi"), chat_kinds=kinds)
    assert p.chat_id == clean
    assert p.sends == [{**target, "message": "hi"}]


@pytest.mark.parametrize(
    ("text", "styles_on", "expected"),
    [
        ("**hi** there", True, {"message": "hi there", "textStyle": ["0:2:BOLD"]}),
        ("**hi** there", False, {"message": "hi there"}),
        ("plain", True, {"message": "plain"}),
        (
            "😀 *it* ~~x~~",
            True,
            {"message": "😀 it x", "textStyle": ["3:2:ITALIC", "6:1:STRIKETHROUGH"]},
        ),
        (
            "[docs](https://e.example/d) `c`",
            True,
            {"message": "docs (https://e.example/d) c", "textStyle": ["27:1:MONOSPACE"]},
        ),
    ],
)
def test_text_and_styles(text: str, styles_on: bool, expected: dict[str, Any]) -> None:
    p = plan(OutboundMessage(chat_id=ALICE, text=text), text_styles=styles_on)
    assert p.sends == [{"recipient": [ALICE], **expected}]


@pytest.mark.parametrize("limit", [40, 100, 4000])
def test_chunking_at_the_limit(limit: int) -> None:
    words = [f"w{i}" for i in range(600)]
    text = "\n\n".join(" ".join(words[i : i + 30]) for i in range(0, 600, 30))
    p = plan(OutboundMessage(chat_id=ALICE, text=f"**{words[0]}** " + text), chunk_limit=limit)
    messages = [s["message"] for s in p.sends]
    assert all(0 < len(m) <= limit for m in messages)
    assert " ".join(messages).split() == [words[0], *words]  # nothing lost, order kept
    assert (len(messages) == 1) == (limit == 4000)
    assert p.sends[0]["textStyle"] == ["0:2:BOLD"]
    assert all("textStyle" not in s for s in p.sends[1:])


def test_chunk_limit_of_exactly_the_text_length_sends_one() -> None:
    text = "x" * 50
    assert len(plan(OutboundMessage(chat_id=ALICE, text=text), chunk_limit=50).sends) == 1
    assert len(plan(OutboundMessage(chat_id=ALICE, text=text), chunk_limit=49).sends) == 2


LONG = "\n\n".join(("word " * 20).strip() for _ in range(6))  # ~600 chars


@pytest.mark.parametrize(
    ("chat_id", "reply_to", "mode", "memory", "expected_quote", "quoted_sends"),
    [
        pytest.param(
            GROUP,
            str(TS),
            "first",
            {"authors": {(GROUP, str(TS)): (ALICE, "question?")}},
            {"quoteTimestamp": TS, "quoteAuthor": ALICE, "quoteMessage": "question?"},
            [0],
            id="remembered-in-group-first-chunk",
        ),
        pytest.param(
            GROUP,
            str(TS),
            "all",
            {"authors": {(GROUP, str(TS)): (ALICE, "question?")}},
            {"quoteTimestamp": TS, "quoteAuthor": ALICE, "quoteMessage": "question?"},
            "all",
            id="remembered-in-group-all-chunks",
        ),
        pytest.param(
            GROUP,
            str(TS),
            "first",
            {"authors": {("", str(TS)): (BOB, "")}},
            {"quoteTimestamp": TS, "quoteAuthor": BOB},
            [0],
            id="remembered-in-any-chat",
        ),
        pytest.param(
            GROUP,
            str(TS),
            "first",
            {"own_sent": {TS}},
            {"quoteTimestamp": TS, "quoteAuthor": BOT},
            [0],
            id="own-sent-message",
        ),
        pytest.param(
            ALICE,
            str(TS),
            "first",
            {},
            {"quoteTimestamp": TS, "quoteAuthor": ALICE},
            [0],
            id="dm-unknown-author-is-the-peer",
        ),
        pytest.param(GROUP, str(TS), "first", {}, None, [], id="group-unknown-author-no-quote"),
        pytest.param(ALICE, "msg-17", "first", {}, None, [], id="not-a-timestamp-no-quote"),
        pytest.param(ALICE, None, "all", {}, None, [], id="no-reply"),
    ],
)
def test_quotes(
    chat_id: str,
    reply_to: str | None,
    mode: Any,
    memory: dict[str, Any],
    expected_quote: dict[str, Any] | None,
    quoted_sends: Any,
) -> None:
    msg = OutboundMessage(chat_id=chat_id, text=LONG, reply_to_id=reply_to, reply_mode=mode)
    p = plan(msg, chunk_limit=250, **memory)
    assert len(p.sends) >= 3
    assert p.quote == expected_quote
    quoted = [i for i, s in enumerate(p.sends) if "quoteTimestamp" in s]
    assert quoted == (list(range(len(p.sends))) if quoted_sends == "all" else quoted_sends)
    for i in quoted:
        assert {k: p.sends[i][k] for k in expected_quote or {}} == expected_quote


def test_media(tmp_path: Path) -> None:
    present = str(tmp_path / "chart.png")
    on_disk_but_not_said = tmp_path / "other.png"
    on_disk_but_not_said.write_bytes(b"x")  # the translator trusts local_files, never the disk
    media = [
        MediaItem(kind="image", target=present, name="chart.png"),
        MediaItem(kind="document", target="https://example.invalid/report.pdf"),
        MediaItem(kind="video", target="http://example.invalid/v.mp4"),
        MediaItem(kind="image", target=str(on_disk_but_not_said), name="other.png"),
        MediaItem(kind="image", target="relative.png"),
    ]
    p = plan(
        OutboundMessage(chat_id=ALICE, text="here", media=media),
        local_files={present, "relative.png"},
    )
    assert p.sends == [
        {
            "recipient": [ALICE],
            "message": "here\n\nFile: https://example.invalid/report.pdf\nVideo: http://example.invalid/v.mp4\n"
            "[attachment unavailable: other.png]\n[attachment unavailable: relative.png]",
            "attachments": [present],
        }
    ]


def test_attachments_go_with_the_last_chunk_and_notes_may_need_their_own() -> None:
    f = "/srv/media/a.txt"
    text = "x" * 95
    p = plan(
        OutboundMessage(
            chat_id=GROUP,
            text=text,
            media=[MediaItem("document", f), MediaItem("image", "https://e.invalid/i.png")],
        ),
        chunk_limit=100,
        local_files={f},
    )
    assert p.sends == [
        {"groupId": GROUP, "message": text},
        {"groupId": GROUP, "message": "Image: https://e.invalid/i.png", "attachments": [f]},
    ]


def test_notes_longer_than_the_limit_are_split_at_line_ends() -> None:
    media = [MediaItem("document", f"https://example.invalid/{i:02}.pdf") for i in range(8)]
    p = plan(OutboundMessage(chat_id=ALICE, text="see", media=media), chunk_limit=80)
    messages = [s["message"] for s in p.sends]
    assert messages[0] == "see"
    assert all(len(m) <= 80 for m in messages) and len(messages) > 2
    lines = [line for m in messages[1:] for line in m.split("\n")]
    assert lines == [f"File: https://example.invalid/{i:02}.pdf" for i in range(8)]


@pytest.mark.parametrize(
    ("msg", "files", "expected"),
    [
        (
            OutboundMessage(chat_id=ALICE, media=[MediaItem("document", "/m/a.txt")]),
            {"/m/a.txt"},
            [{"recipient": [ALICE], "attachments": ["/m/a.txt"]}],
        ),
        (OutboundMessage(chat_id=ALICE, text="   "), set(), []),
        (OutboundMessage(chat_id=ALICE, text="", media=[]), set(), []),
    ],
    ids=["attachment-only", "blank", "empty"],
)
def test_empty_and_attachment_only(
    msg: OutboundMessage, files: set[str], expected: list[dict[str, Any]]
) -> None:
    assert plan(msg, local_files=files).sends == expected


@pytest.mark.parametrize(
    ("chat_id", "message_id", "memory", "expected"),
    [
        (
            GROUP,
            str(TS),
            {"authors": {(GROUP, str(TS)): (BOB, "nice")}},
            {"groupId": GROUP, "targetAuthor": BOB},
        ),
        (GROUP, str(TS), {"own_sent": {TS}}, {"groupId": GROUP, "targetAuthor": BOT}),
        (ALICE, str(TS), {}, {"recipient": [ALICE], "targetAuthor": ALICE}),
        ("direct:" + GROUP, str(TS), {}, {"recipient": [GROUP], "targetAuthor": GROUP}),
    ],
)
def test_reaction_params(
    chat_id: str, message_id: str, memory: dict[str, Any], expected: dict[str, Any]
) -> None:
    params = translate.reaction_params(
        chat_id, message_id, "👍", me=ME, chat_kinds={}, **{"authors": {}, **memory}
    )
    assert params == {**expected, "emoji": "👍", "targetTimestamp": TS}


@pytest.mark.parametrize(
    ("chat_id", "message_id", "match"),
    [
        ("group:" + GROUP, "12345", "unknown author"),
        (ALICE, "abc", "non-timestamp"),
        (ALICE, "", "non-timestamp"),
    ],
)
def test_reaction_refused(chat_id: str, message_id: str, match: str) -> None:
    with pytest.raises(ChannelError, match=match):
        translate.reaction_params(chat_id, message_id, "👍", me=ME, chat_kinds={}, authors={})


# ----------------------------------------------------------------------------- purity


ALLOWED_IMPORTS = {
    "__future__",
    "collections.abc",
    "dataclasses",
    "math",
    "pathlib",
    "re",
    "typing",
    "channels.base",
    "channels.chunking",
    "channels.formatting",
    "channels.signal.inbound",
}


@pytest.mark.parametrize("module", ["translate", "inbound", "sse"])
def test_pure_modules_import_no_io(module: str) -> None:
    path = Path(translate.__file__).with_name(f"{module}.py")
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    assert names, "the walk must see the module's imports"
    assert names <= ALLOWED_IMPORTS, names - ALLOWED_IMPORTS


def test_a_link_shows_its_url_after_the_label_and_once_when_they_are_the_same() -> None:
    """docs/channels.md, "Signal shows a link's URL": Signal has no link markup."""
    from channels.formatting import markdown_to_signal

    assert markdown_to_signal("[docs](https://c.d/x)") == ("docs (https://c.d/x)", [])
    assert markdown_to_signal("[https://a.b](https://a.b)") == ("https://a.b", [])
