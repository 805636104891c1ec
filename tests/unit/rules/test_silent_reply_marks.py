"""docs/channels.md, "NO_REPLY 👍 is silent": the token followed only by a few marks (an
emoji, punctuation) says nothing; real content around it is still delivered."""

from __future__ import annotations

import pytest

from bot.rules.replies import parse_reply


@pytest.mark.parametrize("reply", ["NO_REPLY 👍", "NO_REPLY.", "no_reply 👍!", "**NO_REPLY** 🙂"])
def test_the_token_with_a_trailing_mark_is_silent(reply: str) -> None:
    plan = parse_reply(reply)
    assert plan.silent and plan.text == ""


@pytest.mark.parametrize(
    ("reply", "sent"),
    [
        ("Done. NO_REPLY 👍", "Done."),  # content before the token
        ("👍 NO_REPLY", "👍"),  # an emoji before the token is content
        ("NO_REPLY: see you 👍", "see you 👍"),  # words after the token
    ],
)
def test_content_around_the_token_is_still_sent(reply: str, sent: str) -> None:
    plan = parse_reply(reply)
    assert not plan.silent and plan.text == sent
