"""Text tool protocol (issue 27): a <tool_call> closed by the wrong tag, as local models
write it, is parsed and the stray closing tag never reaches the user."""

from __future__ import annotations

import pytest

from bot.rules.textproto import parse_tool_calls

CALL = '<tool_call>{"name": "read", "arguments": {"path": "a"}}'


@pytest.mark.parametrize(
    ("reply", "visible"),
    [
        (CALL + "</arg_value>", ""),
        ("Checking. " + CALL + "</invoke> Done", "Checking.  Done"),
        (CALL + "</minimax:tool_call>\n\nDone", "Done"),
        (CALL + "\n</arg_value>\n</invoke>\n</minimax:tool_call>\nDone", "Done"),
        (CALL + "\n</arg_value>\n</tool_call>", ""),
    ],
)
def test_wrong_closing_tag_is_parsed_and_not_shown(reply, visible):
    text, calls = parse_tool_calls(reply)
    assert [(c.name, c.arguments, c.error) for c in calls] == [("read", {"path": "a"}, None)]
    assert text == visible
    assert "</" not in text


@pytest.mark.parametrize(
    "reply",
    [
        "Close the element with </invoke> in your XML.",
        "Use `</arg_value>` here.",
    ],
)
def test_closing_tags_in_prose_stay(reply):
    assert parse_tool_calls(reply) == (reply, [])


def test_prose_closing_tag_after_a_call_with_text_between_stays():
    text, calls = parse_tool_calls(CALL + "</tool_call> then write </invoke>.")
    assert [c.name for c in calls] == ["read"]
    assert text == "then write </invoke>."
