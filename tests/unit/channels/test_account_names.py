"""How a channel account is named (channels/base.py) and how the ``message`` tool reads a
target naming one (bot/agent/tools/session.py): pure tables."""

from __future__ import annotations

import pytest

from bot.agent.tools.session import message_target
from channels.base import account_key, adapter_for, labels, split_account_key


@pytest.mark.parametrize(
    ("channel", "account", "key"),
    [
        ("telegram", "default", "telegram"),
        ("telegram", "", "telegram"),
        ("slack", "work", "slack:work"),
    ],
)
def test_an_account_key_and_back(channel, account, key):
    assert account_key(channel, account) == key
    assert split_account_key(key) == (channel, account or "default")


def test_telegram_default_is_the_plain_channel():
    assert account_key(*split_account_key("telegram:default")) == "telegram"


def test_labels_name_every_account_of_a_channel_with_several():
    got = labels(["telegram", "telegram:work", "slack", "http"])
    assert got == {
        "telegram": "telegram:default",
        "telegram:work": "telegram:work",
        "slack": "slack",
        "http": "http",
    }


def test_an_adapter_is_never_another_accounts():
    home, work = object(), object()
    adapters = {"telegram": home, "telegram:work": work}
    assert adapter_for(adapters, "telegram", "work") is work
    assert adapter_for(adapters, "telegram", "default") is home
    assert adapter_for(adapters, "telegram", "play") is None  # not the default's


@pytest.mark.parametrize(
    ("channel", "to", "want"),
    [
        ("", "", ("", "")),  # this chat
        ("", "42", ("", "42")),
        ("telegram", "42", ("telegram", "42")),
        ("", "telegram:work:42", ("telegram:work", "42")),
        ("telegram", "telegram:work:42", ("telegram:work", "42")),
        ("telegram:work", "42", ("telegram:work", "42")),
        ("telegram:default", "42", ("telegram", "42")),
        ("", "telegram:42", ("telegram", "42")),
        ("slack", "C1:x", ("slack", "C1:x")),  # not a channel's name: a chat id as it is
        ("discord", "telegram:work:42", ("discord", "telegram:work:42")),  # two channels
    ],
)
def test_a_message_target_may_name_an_account(channel, to, want):
    assert message_target(channel, to) == want
