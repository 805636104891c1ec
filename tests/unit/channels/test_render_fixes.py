"""Replies that render right (issue 27): an unterminated inline code span is closed as code
(Telegram got a raw backtick); a link whose label is its URL, or the URL's normalised form,
shows once on Signal (plain text) and Slack.  Each with its twin."""

from __future__ import annotations

import pytest

from channels.formatting import (
    markdown_to_plain,
    markdown_to_signal,
    markdown_to_slack_mrkdwn,
    markdown_to_telegram_html,
)


def test_an_unterminated_code_span_is_closed_as_code_on_telegram():
    assert markdown_to_telegram_html("prefix `unterminated") == "prefix <code>unterminated</code>"
    # to the end of its line only; the next line is text again
    assert markdown_to_telegram_html("run `ls -la\nthen *look*") == (
        "run <code>ls -la</code>\nthen <i>look</i>"
    )


def test_an_unterminated_code_span_on_signal_and_slack():
    assert markdown_to_signal("prefix `unterminated") == ("prefix unterminated", ["7:12:MONOSPACE"])
    assert markdown_to_slack_mrkdwn("prefix `unterminated") == "prefix `unterminated`"


@pytest.mark.parametrize(
    ("md", "html"),
    [
        ("a `b` c", "a <code>b</code> c"),  # a closed span is as before
        ("5 ` apart", "5 ` apart"),  # a lone backtick before a space is a backtick
        ("``double` and `single``", "<code>double` and `single</code>"),
        ("it is `x` or `", "it is <code>x</code> or `"),
    ],
)
def test_twin_backticks_that_are_not_an_unterminated_span(md, html):
    assert markdown_to_telegram_html(md) == html


@pytest.mark.parametrize(
    "md",
    [
        "[example.com](https://example.com/)",
        "[https://example.com/](https://example.com)",
        "[Example.com](https://example.com)",
        "[https://example.com](https://example.com)",
    ],
)
def test_a_link_labelled_with_its_own_url_shows_once(md):
    url = md[md.index("(") + 1 : -1]
    assert markdown_to_plain(md) == url
    assert markdown_to_signal(md)[0] == url
    assert markdown_to_slack_mrkdwn(md) == f"<{url}>"


def test_twin_a_link_with_a_real_label_keeps_both():
    md = "see [the docs](https://example.com/docs)"
    assert markdown_to_signal(md)[0] == "see the docs (https://example.com/docs)"
    assert markdown_to_slack_mrkdwn(md) == "see <https://example.com/docs|the docs>"
    # a label naming another page of the site is not the URL
    other = "[example.com](https://example.com/pricing)"
    assert markdown_to_plain(other) == "example.com (https://example.com/pricing)"
    assert markdown_to_slack_mrkdwn(other) == "<https://example.com/pricing|example.com>"
