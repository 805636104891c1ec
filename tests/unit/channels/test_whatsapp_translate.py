"""channels/whatsapp/translate.py: the Agent Platform's JSON ⇄ Chela, pure."""

from __future__ import annotations

import pytest

from channels.whatsapp import translate as t
from channels.whatsapp.transport import ApiError
from channels.whatsapp.transport.agent_platform import Pacer, check_base, media_url_allowed

ME = "user:50972923564215"


def answer(messages=(), statuses=(), next_offset=7, **extra):
    value = {
        "messaging_product": "whatsapp",
        "contacts": [{"wa_id": ME, "profile": {"name": "Alex"}}],
        "messages": list(messages),
        "statuses": list(statuses),
    }
    return {
        "object": "whatsapp_agent_platform",
        "entry": [{"id": "42", "changes": [{"field": "messages", "value": value}]}],
        "next_offset": next_offset,
        **extra,
    }


def text_msg(body="hi", **kw):
    return {
        "from": ME,
        "id": "wamid.1",
        "timestamp": "1700000000",
        "type": "text",
        "text": {"body": body},
        **kw,
    }


def test_an_answer_gives_its_cursor_agent_messages_and_names():
    b = t.parse_updates(answer([text_msg()], [{"id": "wamid.o", "status": "read"}]))
    assert (b.next_offset, b.agent_id, b.names, b.statuses) == (7, "42", {ME: "Alex"}, 1)
    assert b.messages == [text_msg()]


@pytest.mark.parametrize(
    "body",
    [
        None,
        [],
        {"object": "page", "next_offset": 1},
        answer(next_offset="7"),
        answer(next_offset=None),
        answer(next_offset=True),
    ],
)
def test_malformed_answers_are_refused(body):
    with pytest.raises(t.Malformed):
        t.parse_updates(body)


def test_bad_items_inside_a_good_answer_are_dropped_one_by_one():
    body = answer([text_msg(), "junk", 3])
    body["entry"].append("junk")
    body["entry"][0]["changes"].append({"field": "other", "value": {"messages": [text_msg()]}})
    assert t.parse_updates(body).messages == [text_msg()]


def test_a_text_message_becomes_an_inbound_message():
    m = t.inbound_message(text_msg("hello"), names={ME: "Alex"}, account="default")
    assert m is not None
    assert (m.channel, m.chat_id, m.sender_id, m.text, m.message_id, m.raw_id) == (
        "whatsapp",
        ME,
        ME,
        "hello",
        "wamid.1",
        "wamid.1",
    )
    assert m.sender_name == "Alex" and m.timestamp == 1700000000.0 and m.chat_type == "direct"


def test_a_quote_of_the_agent_is_a_reply_to_the_bot():
    m = t.inbound_message(
        text_msg(context={"id": "wamid.q", "from": "agent:9"}), names={}, account="a"
    )
    assert m is not None and m.reply_to_id == "wamid.q" and m.reply_to_bot and m.account == "a"


@pytest.mark.parametrize(
    ("mtype", "obj", "kind", "text"),
    [
        ("image", {"id": "m1", "mime_type": "image/jpeg", "caption": "look"}, "image", "look"),
        ("audio", {"id": "m1", "mime_type": "audio/ogg; codecs=opus", "voice": True}, "voice", ""),
        ("audio", {"id": "m1", "mime_type": "audio/mpeg"}, "audio", ""),
        ("document", {"id": "m1", "mime_type": "image/png", "filename": "p.png"}, "image", ""),
        (
            "document",
            {"id": "m1", "mime_type": "application/pdf", "filename": "a.pdf"},
            "document",
            "",
        ),
        ("sticker", {"id": "m1", "mime_type": "image/webp", "animated": False}, "image", ""),
        ("video", {"id": "m1", "mime_type": "video/mp4"}, "video", ""),
    ],
)
def test_media_messages_carry_an_unfetched_attachment(mtype, obj, kind, text):
    raw = {"from": ME, "id": "wamid.2", "type": mtype, mtype: obj}
    m = t.inbound_message(raw, names={}, account="default")
    assert m is not None and m.text == text
    (item,) = m.attachments
    assert (item.kind, item.ref, item.target) == (kind, "m1", "")
    assert ";" not in item.mime


@pytest.mark.parametrize(
    "raw",
    [
        {"from": ME, "id": "w", "type": "reaction", "reaction": {"message_id": "x", "emoji": "x"}},
        {"from": ME, "id": "w", "type": "location", "location": {}},
        {"from": "agent:1", "id": "w", "type": "text", "text": {"body": "x"}},
        {"from": "user:abc", "id": "w", "type": "text", "text": {"body": "x"}},
        {"from": ME, "type": "text", "text": {"body": "x"}},
        {"from": ME, "id": "w", "type": "text", "text": "x"},
        {"from": ME, "id": "w", "type": "text", "text": {"body": ""}},
        {"from": ME, "id": "w", "type": "image", "image": {"mime_type": "image/png"}},
        {"from": ME, "id": "w"},
    ],
)
def test_what_is_never_answered_gives_none(raw):
    assert t.inbound_message(raw, names={}, account="default") is None


def test_the_newest_user_message_of_a_backlog():
    msgs = [text_msg(id="a"), text_msg(id="b"), {"from": ME, "id": "c", "type": "reaction"}]
    assert t.newest_message_id(msgs) == "b"
    assert t.newest_message_id([]) == ""


def test_markdown_becomes_whatsapp_markup_in_chunks_within_the_limit():
    assert t.text_chunks("**bold** *it* ~~gone~~ `x`") == ["*bold* _it_ ~gone~ `x`"]
    long = "\n\n".join("😀" * 60 for _ in range(20))  # 2 UTF-16 units each
    chunks = t.text_chunks(long, 500)
    assert all(t.utf16_len(c) <= 500 for c in chunks) and "".join(chunks).count("😀") == 1200
    assert max(t.utf16_len(c) for c in t.text_chunks("y" * 10000, 9999)) <= t.HARD_LIMIT


def test_text_payload_quotes_only_when_asked():
    assert "context" not in t.text_payload(ME, "x")
    assert t.text_payload(ME, "x", "wamid.q")["context"] == {"message_id": "wamid.q"}


@pytest.mark.parametrize(
    ("kind", "mime", "size", "mtype", "upload"),
    [
        ("image", "image/png", 1000, "image", "image/png"),
        ("document", "image/jpeg", 1000, "document", "image/jpeg"),
        ("voice", "audio/ogg", 1000, "audio", "audio/ogg"),
        ("document", "text/markdown", 10, "document", "text/plain"),
        ("document", "text/csv", 10, "document", "text/plain"),
        ("video", "video/mp4", 1000, "video", "video/mp4"),
        ("document", "application/pdf", 1000, "document", "application/pdf"),
    ],
)
def test_files_go_as_a_type_the_platform_takes(kind, mime, size, mtype, upload):
    assert t.media_plan(kind, mime, size, "f") == t.MediaPlan(mtype, upload)


@pytest.mark.parametrize(
    ("kind", "mime", "size", "why"),
    [
        ("image", "image/gif", 10, "cannot be sent"),
        ("audio", "audio/wav", 10, "cannot be sent"),
        ("document", "application/zip", 10, "cannot be sent"),
        ("image", "image/png", 6 * 1024 * 1024, "5 MB"),
        ("document", "application/pdf", 17 * 1024 * 1024, "16 MB"),
    ],
)
def test_files_the_platform_refuses_become_a_note(kind, mime, size, why):
    plan = t.media_plan(kind, mime, size, "f.bin")
    assert plan.mtype == "" and why in plan.note and "f.bin" in plan.note


def test_media_payload_puts_caption_and_filename_only_where_allowed():
    img = t.media_payload(ME, t.MediaPlan("image", "image/png"), "id1", caption="c", filename="f")
    assert img["image"] == {"id": "id1", "caption": "c"}
    aud = t.media_payload(ME, t.MediaPlan("audio", "audio/ogg"), "id2", caption="c", filename="f")
    assert aud["audio"] == {"id": "id2"}
    doc = t.media_payload(ME, t.MediaPlan("document", "text/plain"), "id3", filename="n.md")
    assert doc["document"] == {"id": "id3", "filename": "n.md"}


def test_status_payload_reads_and_types():
    assert "typing_indicator" not in t.status_payload("w", typing=False)
    assert t.status_payload("w", typing=True)["typing_indicator"] == {"type": "text"}


def test_the_key_goes_only_to_https_or_loopback():
    assert check_base("https://api.whatsapp.com/agent/v1/") == "https://api.whatsapp.com/agent/v1"
    assert check_base("http://127.0.0.1:9/agent/v1")
    with pytest.raises(Exception, match="https"):
        check_base("http://example.com/agent/v1")


@pytest.mark.parametrize(
    ("url", "ok"),
    [
        ("https://lookaside.fbsbx.com/agent/v1/media/x/content", True),
        ("https://mmg.whatsapp.net/x", True),
        ("https://api.whatsapp.com/x", True),
        ("http://lookaside.fbsbx.com/x", False),
        ("https://evil.example/x", False),
        ("https://fbsbx.com.evil.example/x", False),
        ("file:///etc/passwd", False),
    ],
)
def test_media_urls_only_on_the_platform_hosts(url, ok):
    assert media_url_allowed(url, "https://api.whatsapp.com/agent/v1") is ok


def test_errors_tell_the_outbox_what_a_retry_can_do():
    assert ApiError("x", 403, 131005).permanent
    assert ApiError("x", 400, 131009).permanent
    assert not ApiError("x", 429, 130429).permanent
    assert not ApiError("x", 503, 131016).permanent
    assert ApiError("x", 500, 2, unknown_outcome=True).permanent  # a send may have gone out


async def test_the_pacer_lets_limit_calls_per_window():
    now = [0.0]
    pacer = Pacer(3, 10.0, clock=lambda: now[0])
    for _ in range(3):
        await pacer.take()
    assert pacer.wait_needed() == 10.0
    now[0] = 4.0
    assert pacer.wait_needed() == 6.0
    now[0] = 10.0
    assert pacer.wait_needed() == 0.0
