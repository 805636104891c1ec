"""One descriptor per channel (issue 18): the table in bot/channel_specs.py is the only place the
core learns which channels exist, how each is built and which secrets it needs."""

from __future__ import annotations

import pytest

from bot.app.channels import CONFIGURED, MESSAGING, SPECS, env_fields
from bot.config import ChannelPolicy, ChannelsConfig, parse_config
from bot.config.channels import SECTIONS, title
from bot.app.daemon import SecretMissing, build_channel, enabled_channels
from channels.base import Channel


def test_every_config_section_has_a_descriptor_and_back():
    assert set(ChannelsConfig.model_fields) == set(SPECS) == set(CONFIGURED)
    assert set(MESSAGING) == set(CONFIGURED) - {"http"}


@pytest.mark.parametrize("name", list(SPECS))
def test_each_adapter_is_a_channel_with_the_descriptors_name(name):
    cls = SPECS[name].adapter_class()
    assert issubclass(cls, Channel) and cls.name == name


@pytest.mark.parametrize("name", list(MESSAGING))
def test_the_config_knows_which_platforms_edit_messages_as_their_adapters_do(name):
    # the config (the bottom of bot/) warns about streaming = "partial" without importing the
    # adapters, from the section's EDITS; this keeps that data equal to the adapter's capability
    section = SECTIONS[name]
    assert issubclass(section, ChannelPolicy)
    assert section.EDITS is SPECS[name].adapter_class().capabilities.edit
    assert SPECS[name].title == title(name) == section.TITLE != ""


def _all_env_config(monkeypatch) -> tuple[dict, dict[str, str]]:
    """A config naming a distinct variable in every *_env field, each variable set."""
    names = {
        "agent": {"api_key_env": "V_AGENT"},
        "owner": {"hash_secret_env": "V_HASH"},
        "tools": {"web": {"brave_api_key_env": "V_BRAVE", "tavily_api_key_env": "V_TAVILY"}},
        "channels": {
            "telegram": {"token_env": "V_TG"},
            "discord": {"token_env": "V_DC"},
            "slack": {
                "bot_token_env": "V_SB",
                "app_token_env": "V_SA",
                "signing_secret_env": "V_SS",
            },
            "whatsapp": {"api_key_env": "V_WA"},
            "http": {"token_env": "V_HTTP"},
        },
        "mcp": {
            "servers": [
                {
                    "name": "cal",
                    "url": "http://127.0.0.1:9/mcp",
                    "headers_env": {"Authorization": "V_MCP"},
                }
            ]
        },
    }
    names["agent"]["fallbacks"] = [{"model": "openai/gpt-4o-mini", "api_key_env": "V_FALLBACK"}]
    values = {}
    variables = (
        "V_AGENT V_HASH V_BRAVE V_TAVILY V_TG V_DC V_SB V_SA V_SS V_WA V_HTTP V_MCP V_FALLBACK"
    )
    for i, var in enumerate(variables.split()):
        values[var] = f"secret-value-{i:02d}-xyz"
        monkeypatch.setenv(var, values[var])
    return names, values


def test_the_secret_list_is_every_env_field_of_the_config(monkeypatch):
    data, values = _all_env_config(monkeypatch)
    cfg = parse_config(data)
    assert set(cfg.secret_env_names()) == set(values)
    assert set(values.values()) <= set(cfg.secret_values())


def test_twin_values_the_config_does_not_take_from_the_environment_are_not_secrets(monkeypatch):
    # SPEC §9.5: a ${VAR} reference in an MCP server's env is a secret; a literal is not
    monkeypatch.setenv("NOT_A_SECRET", "plain-config-value-123")
    monkeypatch.setenv("MCP_REF", "referenced-value-456")
    env = {"LABEL": "literal-label-789", "KEY": "${MCP_REF}"}
    cfg = parse_config({"mcp": {"servers": [{"name": "s", "command": "x", "env": env}]}})
    assert "NOT_A_SECRET" not in cfg.secret_env_names() and "MCP_REF" in cfg.secret_env_names()
    values = cfg.secret_values()
    assert "plain-config-value-123" not in values and "literal-label-789" not in values
    assert "referenced-value-456" in values


def test_a_channel_needs_exactly_its_env_fields_slack_by_mode():
    cfg = parse_config({})
    assert SPECS["telegram"].secrets(cfg) == env_fields(cfg.channels.telegram)
    assert set(cfg.channel_secrets("slack")) == {"bot_token_env", "app_token_env"}
    http_mode = parse_config({"channels": {"slack": {"mode": "http"}}})
    assert set(http_mode.channel_secrets("slack")) == {"bot_token_env", "signing_secret_env"}
    assert cfg.channel_secrets("signal") == {} and cfg.channel_secrets("http") == {}


def test_build_channel_names_the_missing_secret_and_builds_with_it(monkeypatch, tmp_path):
    data = {
        "agent": {"state_dir": str(tmp_path / "s"), "workspace": str(tmp_path / "w")},
        "channels": {"discord": {"enabled": True, "token_env": "SPEC_TEST_DC"}},
    }
    monkeypatch.delenv("SPEC_TEST_DC", raising=False)
    cfg = parse_config(data)
    assert enabled_channels(cfg) == ["discord"]
    with pytest.raises(SecretMissing, match=r"channels\.discord\.token_env: .*SPEC_TEST_DC"):
        build_channel(cfg, "discord")
    monkeypatch.setenv("SPEC_TEST_DC", "a-token")
    ch = build_channel(cfg, "discord")
    assert type(ch) is SPECS["discord"].adapter_class() and ch.name == "discord"
