"""Config validation: every error names its TOML key path; the example config loads."""

from pathlib import Path

import pytest

from bot.cli import main
from bot.config import ConfigError, config_warnings, load_config, parse_config

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize(
    "data, key",
    [
        ({"agent": {"modle": "x"}}, "agent.modle: unknown key"),
        ({"channels": {"telegram": {"dm_policy": "nope"}}}, "channels.telegram.dm_policy"),
        ({"heartbeat": {"every": "30x"}}, "heartbeat.every"),
        ({"agent": {"timezone": "Mars/Olympus"}}, "agent.timezone"),
        ({"agent": {"max_tool_iterations": "many"}}, "agent.max_tool_iterations"),
        (
            {"heartbeat": {"active_hours": {"start": "25:00", "end": "22:00"}}},
            "heartbeat.active_hours.start",
        ),
        ({"cron": [{"name": "x", "schedule": "not cron", "prompt": "p"}]}, "cron[0].schedule"),
        ({"channels": {"signal": {"enabled": True}}}, "channels.signal"),
        ({"channels": {"http": {"listen": "nowhere"}}}, "channels.http.listen"),
        ({"channels": {"slack": {"listen": "127.0.0.1:port"}}}, "channels.slack.listen"),
        ({"tools": {"exec": {"security": "yolo"}}}, "tools.exec.security"),
        ({"heartbeat": {"target": "telegarm"}}, "heartbeat.target: unknown target 'telegarm'"),
        (
            {"cron": [{"name": "x", "schedule": "0 9 * * *", "prompt": "p", "target": "sms"}]},
            "cron[0].target",
        ),
        ({"telegram": {}}, "telegram: unknown key"),
    ],
)
def test_errors_name_the_key(data, key):
    with pytest.raises(ConfigError) as e:
        parse_config(data)
    assert key in str(e.value)


def test_defaults_and_expansion():
    cfg = parse_config(
        {"agent": {"workspace": "~/ws"}, "channels": {"telegram": {"allow_from": [123, "456"]}}}
    )
    assert cfg.agent.workspace == Path("~/ws").expanduser()
    assert cfg.channels.telegram.allow_from == ["123", "456"]
    assert cfg.heartbeat.every_seconds == 1800
    assert cfg.channels.telegram.dm_policy == "pairing"
    assert cfg.channels.telegram.group_policy == "allowlist"


def test_example_config_loads_without_secrets(monkeypatch):
    for var in ("TELEGRAM_BOT_TOKEN", "DISCORD_BOT_TOKEN", "SLACK_BOT_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    cfg = load_config(str(ROOT / "config.example.toml"))
    assert cfg.channels.http.enabled and cfg.channels.http.listen.startswith("127.0.0.1")
    assert not cfg.channels.telegram.enabled


def test_secret_values_come_from_env(monkeypatch):
    monkeypatch.setenv("MY_TG", "123456:secret-token")
    cfg = parse_config({"channels": {"telegram": {"token_env": "MY_TG"}}})
    assert "123456:secret-token" in cfg.secret_values()


def test_provider_api_keys_are_secrets_even_when_not_configured(monkeypatch):
    """litellm falls back to OPENAI_API_KEY & co. when agent.api_key_env is empty."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-the-environment")
    monkeypatch.setenv("SOME_TOKENISH_SETTING", "not-a-secret")
    values = parse_config({}).secret_values()
    assert "sk-from-the-environment" in values and "not-a-secret" not in values


def test_warnings_for_risky_settings():
    cfg = parse_config(
        {
            "channels": {
                "telegram": {"enabled": True, "dm_policy": "allowlist"},
                "http": {"enabled": True, "listen": "0.0.0.0:8787"},
            },
            "tools": {"exec": {"security": "full"}},
        }
    )
    w = "\n".join(config_warnings(cfg))
    assert (
        "empty allow_from" in w
        and 'security = "full"' in w
        and "reachable from other machines" in w
    )


def test_streaming_partial_on_a_channel_that_cannot_edit_is_a_warning():
    cfg = parse_config(
        {"channels": {"signal": {"enabled": True, "account": "+15550001", "streaming": "partial"}}}
    )
    assert any(
        'channels.signal.streaming = "partial": Signal cannot edit' in w
        for w in config_warnings(cfg)
    )
    # twin: a channel that edits its messages shows the preview, nothing to warn about
    ok = parse_config({"channels": {"telegram": {"enabled": True, "streaming": "partial"}}})
    assert not any("streaming" in w for w in config_warnings(ok))


def test_check_command_exit_codes(tmp_path, capsys):
    bad = tmp_path / "bad.toml"
    bad.write_text('[agent]\nmodel = "x"\nwhat = 1\n')
    assert _exit(["check", "--config", str(bad)]) == 1
    assert "agent.what: unknown key" in capsys.readouterr().err
    broken = tmp_path / "broken.toml"
    broken.write_text("[agent\n")
    assert _exit(["check", "--config", str(broken)]) == 1
    assert "TOML syntax error" in capsys.readouterr().err
    assert _exit(["check", "--config", str(ROOT / "config.example.toml")]) == 0
    assert "channel http: enabled" in capsys.readouterr().out


def test_check_fails_when_enabled_channel_lacks_secret(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("TELEGRAM_BOT_TOKEN", raising=False)
    p = tmp_path / "c.toml"
    p.write_text("[channels.telegram]\nenabled = true\n")
    assert _exit(["check", "--config", str(p)]) == 1
    assert "TELEGRAM_BOT_TOKEN MISSING" in capsys.readouterr().out


def _exit(argv):
    try:
        return main(argv)
    except SystemExit as e:
        return e.code


def test_missing_channel_secret_names_key_and_variable(monkeypatch):
    """One list of needed secrets per channel (and Slack mode) serves the daemon and `chela check`."""
    from bot.app.daemon import SecretMissing, build_channel

    monkeypatch.setenv("T_SLACK_BOT", "xoxb-1")
    monkeypatch.setenv("T_SLACK_APP", "xapp-1")
    monkeypatch.delenv("T_SLACK_SIGNING", raising=False)
    slack = {
        "enabled": True,
        "bot_token_env": "T_SLACK_BOT",
        "app_token_env": "T_SLACK_APP",
        "signing_secret_env": "T_SLACK_SIGNING",
    }
    cfg = parse_config({"channels": {"slack": slack}})
    assert cfg.channel_secrets("slack") == {
        "bot_token_env": "T_SLACK_BOT",
        "app_token_env": "T_SLACK_APP",
    }
    assert (
        build_channel(cfg, "slack").app_token == "xapp-1"
    )  # socket mode: no signing secret needed
    cfg = parse_config({"channels": {"slack": {**slack, "mode": "http"}}})
    with pytest.raises(
        SecretMissing,
        match=r"channels\.slack\.signing_secret_env: environment variable T_SLACK_SIGNING",
    ):
        build_channel(cfg, "slack")
    assert cfg.channel_secrets("signal") == {} and cfg.channel_secrets("http") == {}


@pytest.mark.parametrize(
    "section, key",
    [
        (
            {"channels": {"telegram": {"allow_from": ["42", "@alice"]}}},
            "channels.telegram.allow_from",
        ),
        (
            {"channels": {"discord": {"owner_groups": ["@general"]}}},
            "channels.discord.owner_groups",
        ),
        ({"owner": {"numbers": ["@me"]}}, "owner.numbers"),
    ],
)
def test_usernames_are_refused_where_ids_are_needed(section, key):
    with pytest.raises(ConfigError) as e:
        parse_config(section)
    assert key in str(e.value)
    assert "pairing reply shows their user id" in str(e.value)


def test_ids_are_accepted_where_usernames_are_refused():
    cfg = parse_config(
        {
            "channels": {"discord": {"allow_from": [1234567890], "owner_groups": ["987"]}},
            "owner": {"numbers": ["+15550001111"]},
        }
    )
    assert cfg.channels.discord.allow_from == ["1234567890"]
    assert cfg.channels.discord.owner_groups == ["987"]
    assert cfg.owner.numbers == ["+15550001111"]


def test_owner_only_tools_cannot_be_given_to_guests():
    with pytest.raises(ConfigError) as e:
        parse_config({"tools": {"guest": ["session_status", "memory_search"]}})
    assert "tools.guest" in str(e.value) and "memory_search" in str(e.value)
    assert parse_config({"tools": {"guest": ["session_status", "exec"]}}).tools.guest == [
        "session_status",
        "exec",
    ]
