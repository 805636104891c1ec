"""A mail as the turn reads it, and the from_allow rule."""

from __future__ import annotations

from email.message import EmailMessage

import pytest

from bot.triggers.mailtext import allowed, html_to_text, render_mail


def test_headers_and_the_text_body():
    m = EmailMessage()
    m["From"], m["To"], m["Subject"] = "Bob <Bob@Example.com>", "me@x.org", "Hi"
    m["Date"] = "Sat, 28 Nov 2026 09:30:00 +0000"
    m.set_content("the body")
    got = render_mail(bytes(m))
    assert got.sender == "bob@example.com"
    assert got.text.splitlines()[:4] == [
        "From: Bob <Bob@Example.com>",
        "To: me@x.org",
        "Date: Sat, 28 Nov 2026 09:30:00 +0000",
        "Subject: Hi",
    ]
    assert got.text.endswith("the body")


def test_html_only_is_turned_into_text_and_attachments_are_named_with_size():
    m = EmailMessage()
    m["From"] = "a@b.c"
    m.set_content("<html><head><style>x{}</style></head><p>Hello <b>you</b></p></html>", "html")
    m.add_attachment(b"x" * 4096, "application", "pdf", filename="bill.pdf")
    got = render_mail(bytes(m)).text
    assert "Hello you" in got and "<b>" not in got and "x{}" not in got
    assert "Attachments (not read): bill.pdf (4 KB)" in got


def test_malformed_mime_and_garbage_never_raise():
    for raw in (b"", b"\xff\xfe\x00garbage", b"Content-Type: multipart/mixed\r\n\r\n--"):
        assert isinstance(render_mail(raw).text, str)
    assert html_to_text("<p>a<p>b</unclosed").startswith("a\nb")


@pytest.mark.parametrize(
    ("sender", "allow", "ok"),
    [
        ("a@x.org", [], True),
        ("a@x.org", ["a@x.org"], True),
        ("a@x.org", ["@x.org"], True),
        ("a@evil.x.org", ["@x.org"], False),
        ("b@x.org", ["a@x.org"], False),
        ("", ["@x.org"], False),
    ],
)
def test_from_allow(sender, allow, ok):
    assert allowed(sender, allow) is ok


@pytest.mark.parametrize(
    "header",
    [
        '"boss@school.org" <evil@x.net>',  # a display name that looks like the address
        "boss@school.org <evil@x.net>",  # the same, unquoted
        "<boss@school.org>evil@x.net",
        "boss@school.org)<evil@x.net>",
        "boss@school.org <>",
        "boss@school.org, evil@x.net",  # two senders: neither is taken
        "evil@x.net <boss@school.org> <evil@y.net>",
        "boss@school.org@evil.com",
    ],
)
def test_from_allow_takes_only_the_one_address_the_from_header_names(header):
    raw = f"From: {header}\r\nSubject: s\r\n\r\nhi".encode()
    assert not allowed(render_mail(raw).sender, ["boss@school.org"])


@pytest.mark.parametrize(
    ("header", "sender"),
    [
        ("boss@school.org", "boss@school.org"),
        ("Boss <Boss@School.org>", "boss@school.org"),
        ('"Boss, Head" <boss@school.org>', "boss@school.org"),
        ("=?utf-8?q?Bo=C3=9F?= <boss@school.org>", "boss@school.org"),
        ("boss@school.org (the head)", "boss@school.org"),
    ],
)
def test_a_plain_from_header_passes_from_allow(header, sender):  # the twin
    raw = f"From: {header}\r\nSubject: s\r\n\r\nhi".encode()
    got = render_mail(raw).sender
    assert got == sender and allowed(got, ["boss@school.org"])


def test_a_second_from_header_is_not_taken():
    raw = b"From: boss@school.org\r\nFrom: evil@x.net\r\nSubject: s\r\n\r\nhi"
    assert not allowed(render_mail(raw).sender, ["boss@school.org"])
