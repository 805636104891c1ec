"""Reminders work out of the box: ``cron`` is in the built-in ``tools.enabled``, in
config.example.toml and in the config ``chela onboard`` writes; it stays owner-only."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from bot.agent.turn import Agent
from bot.cli.answers import Answers
from bot.cli.onboard import render
from bot.config import ConfigError, parse_config
from bot.store import Store

ROOT = Path(__file__).resolve().parents[3]


def test_builtin_default_enables_cron():
    assert "cron" in parse_config({}).tools.enabled


@pytest.mark.parametrize("path", ["config.example.toml", "bot/data/config.example.toml"])
def test_example_config_enables_cron(path):
    data = tomllib.loads((ROOT / path).read_text(encoding="utf-8"))
    assert "cron" in data["tools"]["enabled"]


def test_onboard_config_enables_cron(tmp_path):
    text = render(Answers(workspace=str(tmp_path / "ws"), state_dir=str(tmp_path / "st")))
    assert "cron" in parse_config(tomllib.loads(text)).tools.enabled


def test_cron_is_offered_to_the_owner_never_to_a_guest(tmp_path):
    cfg = parse_config(
        {"agent": {"workspace": str(tmp_path / "ws"), "state_dir": str(tmp_path / "st")}}
    )
    agent = Agent(cfg, Store(":memory:"))
    assert "cron" in agent.tool_names("owner")  # twin: the owner has it by default
    assert "cron" not in agent.tool_names("guest")


def test_cron_in_tools_guest_is_refused():
    with pytest.raises((ConfigError, ValueError)):
        parse_config({"tools": {"guest": ["cron"]}})
