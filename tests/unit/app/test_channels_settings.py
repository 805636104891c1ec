"""The registry's typed hand-off: each row takes its config section (and the secrets it names)
to its adapter's frozen Settings, whose open() builds the adapter the row names."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from bot.app.channels import SPECS, Given, build_channel
from bot.config import parse_config

# the keys each channel needs besides enabled = true and its secrets
NEEDS = {"signal": {"account": "+15550001"}}


def _config(tmp_path: Path, name: str, monkeypatch, **section) -> object:
    data = {
        "agent": {"state_dir": str(tmp_path / "s"), "workspace": str(tmp_path / "w")},
        "channels": {name: {"enabled": True, **NEEDS.get(name, {}), **section}},
    }
    cfg = parse_config(data)
    for env in SPECS[name].secrets(cfg).values():
        monkeypatch.setenv(env, f"value-of-{env}")
    return cfg


def _given(cfg, name: str, mounts=None) -> Given:
    spec = SPECS[name]
    secrets = {k: cfg.secret(env) for k, env in spec.secrets(cfg).items()}
    return Given(cfg, spec.section_of(cfg), secrets, cfg.media_dir, mounts)


@pytest.mark.parametrize("name", list(SPECS))
def test_every_row_builds_the_adapter_it_names(tmp_path, monkeypatch, name):
    cfg = _config(tmp_path, name, monkeypatch)
    channel = build_channel(cfg, name)
    assert type(channel) is SPECS[name].adapter_class() and channel.name == name


def test_the_sections_values_and_secrets_reach_the_settings(tmp_path, monkeypatch):
    cfg = _config(
        tmp_path, "telegram", monkeypatch, text_chunk_limit=1234, api_base="http://127.0.0.1:9"
    )
    s = SPECS["telegram"].make_settings(_given(cfg, "telegram"))
    assert (s.chunk_limit, s.api_base, s.media_dir) == (1234, "http://127.0.0.1:9", cfg.media_dir)
    assert s.token == "value-of-TELEGRAM_BOT_TOKEN" and s.commands is not None


def test_slack_in_http_mode_gets_its_signing_secret_and_no_app_token(tmp_path, monkeypatch):
    monkeypatch.delenv("SLACK_APP_TOKEN", raising=False)
    cfg = _config(tmp_path, "slack", monkeypatch, mode="http")
    s = SPECS["slack"].make_settings(_given(cfg, "slack"))
    assert (s.mode, s.app_token) == ("http", "")
    assert s.signing_secret == "value-of-SLACK_SIGNING_SECRET"


def test_signal_api_base_stands_for_its_http_url(tmp_path, monkeypatch):
    cfg = _config(tmp_path, "signal", monkeypatch, api_base="http://127.0.0.1:7")
    assert SPECS["signal"].make_settings(_given(cfg, "signal")).http_url == "http://127.0.0.1:7"
    plain = _config(tmp_path, "signal", monkeypatch)
    assert SPECS["signal"].make_settings(_given(plain, "signal")).http_url == (
        "http://127.0.0.1:8080"
    )


def test_only_the_http_channel_takes_the_apps_mounts(tmp_path, monkeypatch):
    def mounts() -> list:
        return []

    cfg = _config(tmp_path, "http", monkeypatch, listen="127.0.0.1:8799")
    s = SPECS["http"].make_settings(_given(cfg, "http", mounts))
    assert (s.host, s.port, s.mounts) == ("127.0.0.1", 8799, mounts)
    assert s.token and s.token_hint.startswith("in ")
    # a chat channel built with the same mounts is unaffected by them
    cfg = _config(tmp_path, "discord", monkeypatch)
    assert build_channel(cfg, "discord", mounts=mounts).name == "discord"


def test_a_section_of_another_class_is_refused(tmp_path, monkeypatch):
    cfg = _config(tmp_path, "discord", monkeypatch)
    wrong = replace(SPECS["discord"], name="telegram")  # a row pointing at another section
    with pytest.raises(TypeError, match="channels.telegram is not a DiscordConfig"):
        wrong.section_of(cfg)
