"""Replies that render right (issue 27): markup glued to a silent token goes with it, in
the final reply and in what a live preview or an API stream shows; a tag-only reply keeps
its tags."""

from __future__ import annotations

import pytest

from bot.delivery import StreamEvent, StreamText, visible_text
from bot.rules.replies import parse_reply


@pytest.mark.parametrize(
    "raw",
    ["reasoning**NO_REPLY", "reasoning**NO_REPLY**", "reasoning~~NO_REPLY", "reasoning`NO_REPLY`"],
)
def test_markup_glued_to_a_trailing_token_goes_with_it(raw):
    assert parse_reply(raw).text == "reasoning"


@pytest.mark.parametrize(
    ("raw", "text"),
    [
        ("**bold**NO_REPLY", "**bold**"),  # the ** closes a span: it is text
        ("NO_REPLY**bold**", "**bold**"),
        ("Done **NO_REPLY**", "Done"),
        ("**NO_REPLY** hi", "hi"),
        ("SEND_NO_REPLY", "SEND_NO_REPLY"),  # not a token
    ],
)
def test_markup_that_belongs_to_the_text_stays(raw, text):
    assert parse_reply(raw).text == text


def test_preview_never_shows_glued_markup_or_a_token_being_written():
    raw = "reasoning**NO_REPLY"
    for i in range(len("reasoning"), len(raw) + 1):
        assert visible_text(raw[:i]) == "reasoning", raw[:i]


def test_preview_shows_a_closed_span_and_a_glued_word_that_is_no_token():
    assert visible_text("a **bold**") == "a **bold**"
    assert visible_text("**bold**NO_RE") == "**bold**"
    assert visible_text("reasoning**Nope") == "reasoning**Nope"


def test_api_stream_sends_no_part_of_a_glued_token():
    sent: list[str] = []
    stream = StreamText(lambda kind, data: sent.append(data) if kind == "text" else None)
    for piece in ["reason", "ing*", "*NO", "_REP", "LY"]:
        stream.push(StreamEvent("text", piece))
    stream.close()
    assert "".join(sent) == "reasoning"


def test_tag_only_reply_keeps_the_voice_flag():
    plan = parse_reply("[[audio_as_voice]]")
    assert plan.silent and plan.text == ""
    assert plan.audio_as_voice is True


def test_reply_without_the_tag_has_no_voice_flag():
    assert parse_reply("NO_REPLY").audio_as_voice is False
    assert parse_reply("hello").audio_as_voice is False
    plan = parse_reply("[[audio_as_voice]] hello")
    assert plan.audio_as_voice and plan.text == "hello"
