"""LeanBot's own encoding of plain Bot API parameters (channels.telegram.send.plain_form)
gives exactly what PTB's RequestData gives for the same values."""

from __future__ import annotations

import datetime as dtm
from enum import IntEnum

import pytest
from telegram import ReplyParameters
from telegram.request import RequestData
from telegram.request._requestparameter import RequestParameter

from channels.telegram.send import plain_form


def _ptb(data: dict) -> dict[str, str]:
    params = [RequestParameter.from_input(k, v) for k, v in data.items()]
    return RequestData(parameters=params).json_parameters


PLAIN = [
    {"chat_id": 42, "text": "plain words", "parse_mode": "HTML"},
    {"chat_id": -1001234567890, "text": "в топике ✓ \U0001f600 & <b>", "message_thread_id": 9},
    {"chat_id": "@channel", "action": "typing"},
    {"text": "", "chat_id": 0, "message_id": 10},
    {"disable_notification": True, "protect_content": False, "chat_id": 1, "text": "x"},
    {"timeout": 30, "allowed_updates": ["message", "edited_message"], "offset": 100001},
    {"allowed_updates": [], "limit": 1},
    {"ids": [1, -2, 3]},
]


@pytest.mark.parametrize("data", PLAIN)
def test_plain_parameters_are_encoded_as_ptb_encodes_them(data: dict) -> None:
    form = plain_form(data)
    assert form is not None
    assert form.json_parameters == _ptb(data)
    assert list(form.json_parameters) == list(_ptb(data))  # the order is the body's order
    assert form.multipart_data == {}
    assert not form.contains_files
    assert form.parameters == data


class Level(IntEnum):
    HIGH = 2


@pytest.mark.parametrize(
    "value",
    [
        ReplyParameters(message_id=7, allow_sending_without_reply=True),
        {"message_id": 7},
        [True, False],
        ["a", {"b": 1}],
        1.5,
        Level.HIGH,
        dtm.datetime(2026, 11, 27, tzinfo=dtm.UTC),
        dtm.timedelta(seconds=30),
        b"bytes",
    ],
)
def test_anything_else_is_left_to_ptb(value: object) -> None:
    assert plain_form({"chat_id": 42, "x": value}) is None
