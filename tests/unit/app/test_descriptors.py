"""Each chat channel's descriptor carries what differs per platform for onboarding and the
doctor (issue 24 item 7): the onboard flags and questions come from its ``settings``, its
doctor probe is named by it, and the answers round-trip through the written config."""

from __future__ import annotations

import argparse

import pytest

from bot.app.channels import MESSAGING, SPECS
from bot.cli import onboard
from bot.cli.answers import answers_from_file
from bot.config import ConfigError


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    onboard.add_parser(parser.add_subparsers())
    return parser.parse_args(["onboard", "--non-interactive", *argv])


def test_every_chat_channel_has_a_probe_and_an_owner_hint():
    for name in MESSAGING:
        assert SPECS[name].probe is not None and SPECS[name].owner_id_hint, name


def test_a_needed_setting_is_named_by_its_flag():
    with pytest.raises(ConfigError, match=r"--channel signal needs --signal-account \(the bot's"):
        onboard.from_args(_args("--channel", "signal"))


def test_settings_are_written_and_read_back(tmp_path):
    a = onboard.from_args(
        _args(
            "--channel",
            "signal,telegram",
            "--signal-account",
            "+15550001",
            "--telegram-api-base",
            "http://127.0.0.1:8081",
            "--telegram-token-env",
            "MY_TG",
        )
    )
    text = onboard.render(a)
    assert 'account = "+15550001"' in text and 'http_url = "http://127.0.0.1:8080"' in text
    assert 'api_base = "http://127.0.0.1:8081"' in text and 'token_env = "MY_TG"' in text
    path = tmp_path / "config.toml"
    path.write_text(text)
    onboard.validate(text, path)
    again = answers_from_file(path)
    assert again is not None and again.settings["signal"]["account"] == "+15550001"
    assert again.setting("telegram", "api_base") == "http://127.0.0.1:8081"


def test_an_optional_empty_setting_is_not_written():
    text = onboard.render(onboard.from_args(_args("--channel", "telegram")))
    assert "api_base" not in text.split("[channels.telegram]")[1]
