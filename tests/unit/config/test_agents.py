"""[agents.<id>] and channel accounts: what an agent or an account inherits, the views
(agent_ids, agent_config, channel_accounts), and every config error of theirs named by its
TOML key, each beside its twin (the valid variant loads)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.config import (
    ConfigError,
    agent_config,
    agent_ids,
    channel_accounts,
    parse_config,
)


def two_agents(tmp_path: Path, **work: object) -> dict:
    return {
        "agent": {"workspace": str(tmp_path / "main"), "model": "openai/gpt-4o-mini"},
        "agents": {"work": {"workspace": str(tmp_path / "work"), **work}},
    }


def error(data: dict) -> str:
    with pytest.raises(ConfigError) as e:
        parse_config(data)
    return str(e.value)


# -- a config without the new tables ------------------------------------------------------


def test_a_config_without_agents_or_accounts_has_one_agent_and_one_account():
    cfg = parse_config({"channels": {"telegram": {"enabled": True}}})
    assert agent_ids(cfg) == ["main"]
    assert agent_config(cfg, "main") is cfg
    assert list(channel_accounts(cfg, "telegram")) == ["default"]
    assert channel_accounts(cfg, "telegram")["default"] is cfg.channels.telegram
    assert channel_accounts(cfg, "discord") == {}  # not enabled
    assert channel_accounts(cfg, "http") == {}  # no accounts there
    assert cfg.bindings == []


def test_the_default_agent_keeps_its_own_id():
    cfg = parse_config({"agent": {"id": "home"}, "agents": {"work": {"workspace": "/tmp/w1"}}})
    assert agent_ids(cfg) == ["home", "work"]
    assert agent_config(cfg, "home") is cfg


# -- inheritance ---------------------------------------------------------------------------


def test_an_agent_takes_every_agent_key_it_does_not_set(tmp_path):
    data = two_agents(tmp_path, model="anthropic/claude-sonnet-4-5", name="Workbot")
    data["agent"] |= {"timezone": "Europe/Paris", "daily_cost_limit_usd": 2.5, "name": "Chela"}
    data["agent"]["compaction"] = {"threshold": 0.6, "keep_recent_tokens": 5000}
    data["agents"]["work"]["compaction"] = {"threshold": 0.9}
    cfg = parse_config(data)
    work = agent_config(cfg, "work")
    assert work.agent.id == "work"
    assert (work.agent.name, work.agent.model) == ("Workbot", "anthropic/claude-sonnet-4-5")
    assert work.agent.workspace == tmp_path / "work"
    assert work.agent.timezone == "Europe/Paris"  # inherited
    assert work.agent.daily_cost_limit_usd == 2.5  # budgets are [agent] keys: inherited too
    assert work.agent.compaction.threshold == 0.9  # its own
    assert work.agent.compaction.keep_recent_tokens == 5000  # the nested table's other keys
    assert work.agent.state_dir == cfg.agent.state_dir  # the daemon's
    # the default agent is untouched
    assert (cfg.agent.id, cfg.agent.name, cfg.agent.workspace) == (
        "main",
        "Chela",
        tmp_path / "main",
    )


def test_an_agent_takes_the_top_level_tools_and_heartbeat_unless_it_has_its_own(tmp_path):
    data = two_agents(tmp_path)
    data["tools"] = {
        "enabled": ["read", "exec"],
        "exec": {"security": "deny", "timeout_seconds": 9},
    }
    data["heartbeat"] = {"every": "1h", "target": "telegram"}
    cfg = parse_config(data)
    work = agent_config(cfg, "work")
    assert work.tools == cfg.tools and work.heartbeat == cfg.heartbeat

    data["agents"]["work"]["tools"] = {"enabled": ["read"], "exec": {"timeout_seconds": 30}}
    data["agents"]["work"]["heartbeat"] = {"every": "0m"}
    cfg = parse_config(data)
    work = agent_config(cfg, "work")
    assert work.tools.enabled == ["read"]
    assert work.tools.exec.timeout_seconds == 30
    assert work.tools.exec.security == "deny"  # a key its table does not set: the top level's
    assert work.heartbeat.every_seconds == 0 and work.heartbeat.target == "telegram"
    assert cfg.tools.enabled == ["read", "exec"] and cfg.heartbeat.every == "1h"  # untouched


def test_the_daemons_tables_stay_the_daemons(tmp_path):
    data = two_agents(tmp_path)
    data["channels"] = {"telegram": {"enabled": True}}
    cfg = parse_config(data)
    work = agent_config(cfg, "work")
    assert work.channels is cfg.channels and work.db_path == cfg.db_path
    assert work.secrets is cfg.secrets


def test_an_agent_that_is_no_agent_is_a_key_error(tmp_path):
    cfg = parse_config(two_agents(tmp_path))
    with pytest.raises(KeyError):
        agent_config(cfg, "play")


def test_an_account_takes_every_key_of_its_channel_it_does_not_set():
    cfg = parse_config(
        {
            "channels": {
                "telegram": {
                    "enabled": True,
                    "allow_from": ["777001"],
                    "dm_policy": "allowlist",
                    "accounts": {
                        "work": {"token_env": "WORK_BOT_TOKEN", "allow_from": [777002]},
                        "home": {"token_env": "HOME_BOT_TOKEN", "reply_to_mode": "all"},
                        "off": {"token_env": "OFF_BOT_TOKEN", "enabled": False},
                    },
                }
            }
        }
    )
    accounts = channel_accounts(cfg, "telegram")
    assert list(accounts) == ["default", "work", "home"]  # enabled ones, in file order
    work, home = accounts["work"], accounts["home"]
    assert (work.token_env, work.allow_from, work.dm_policy) == (
        "WORK_BOT_TOKEN",
        ["777002"],
        "allowlist",
    )
    assert (home.allow_from, home.reply_to_mode) == (["777001"], "all")  # allow_from inherited
    assert work.accounts == {} and home.accounts == {}
    assert cfg.channels.telegram.reply_to_mode == "off"  # the channel's own table untouched


def test_an_account_may_run_while_the_channels_own_table_is_off():
    cfg = parse_config(
        {"channels": {"discord": {"accounts": {"team": {"enabled": True, "token_env": "T"}}}}}
    )
    assert list(channel_accounts(cfg, "discord")) == ["team"]


def test_account_secrets_reach_the_registry(monkeypatch):
    monkeypatch.setenv("WORK_BOT_TOKEN", "123456:work-secret-value")
    monkeypatch.setenv("WORK_MODEL_KEY", "sk-work-model-key-value")
    cfg = parse_config(
        {
            "channels": {
                "telegram": {"enabled": True, "accounts": {"work": {"token_env": "WORK_BOT_TOKEN"}}}
            },
            "agents": {"work": {"workspace": "/tmp/w2", "api_key_env": "WORK_MODEL_KEY"}},
        }
    )
    assert "WORK_BOT_TOKEN" in cfg.secret_env_names()
    assert "123456:work-secret-value" in cfg.secret_values()
    assert "sk-work-model-key-value" in cfg.secret_values()


# -- errors, each with its twin -------------------------------------------------------------


def test_an_agent_named_as_the_default_agent_is_refused(tmp_path):
    said = error({"agents": {"main": {"workspace": str(tmp_path / "m")}}})
    assert "agents.main: 'main' is the default agent's id" in said
    # twin: the default agent renamed, "main" is free
    cfg = parse_config(
        {"agent": {"id": "home"}, "agents": {"main": {"workspace": str(tmp_path / "m")}}}
    )
    assert agent_ids(cfg) == ["home", "main"]


@pytest.mark.parametrize(
    "key, value, said",
    [
        ("id", "work", "agents.work.id: an agent's id is its table name"),
        ("state_dir", "/tmp/elsewhere", "agents.work.state_dir: the state dir is the daemon's"),
    ],
)
def test_id_and_state_dir_inside_an_agent_are_refused(tmp_path, key, value, said):
    assert said in error(two_agents(tmp_path, **{key: value}))
    assert parse_config(two_agents(tmp_path)).agents["work"]  # twin: without the key


def test_an_agent_without_a_workspace_is_refused(tmp_path):
    data = two_agents(tmp_path)
    del data["agents"]["work"]["workspace"]
    assert "agents.work.workspace: required" in error(data)


def test_an_agents_id_is_a_plain_name(tmp_path):
    said = error({"agents": {"wo:rk": {"workspace": str(tmp_path / "w")}}})
    assert "agents.wo:rk: an agent's id is its table name" in said


def test_an_unknown_key_in_an_agent_is_named(tmp_path):
    assert "agents.work.modle: unknown key" in error(two_agents(tmp_path, modle="x"))
    assert "agents.work.session: unknown key" in error(two_agents(tmp_path, session={}))
    assert "agents.work.tools.exec.security" in error(
        two_agents(tmp_path, tools={"exec": {"security": "yolo"}})
    )


@pytest.mark.parametrize(
    "main, work, how",
    [
        ("ws", "ws", "is the same folder as agent.workspace"),
        ("ws", "ws/work", "is inside agent.workspace"),
        ("ws/main", "ws", "contains agent.workspace"),
        ("ws", "ws/../ws/", "is the same folder as agent.workspace"),
    ],
)
def test_shared_or_nested_workspaces_are_refused(tmp_path, main, work, how):
    data = {
        "agent": {"workspace": str(tmp_path / main)},
        "agents": {"work": {"workspace": str(tmp_path / work)}},
    }
    said = error(data)
    assert f"agents.work.workspace: {(tmp_path / work).resolve()} {how}" in said


def test_workspaces_side_by_side_load(tmp_path):
    data = {
        "agent": {"workspace": str(tmp_path / "ws")},
        "agents": {
            "work": {"workspace": str(tmp_path / "ws-work")},  # a common prefix is no nesting
            "play": {"workspace": str(tmp_path / "play")},
        },
    }
    assert agent_ids(parse_config(data)) == ["main", "work", "play"]


def test_a_link_to_another_agents_workspace_is_the_same_folder(tmp_path):
    (tmp_path / "main").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "main")
    data = {
        "agent": {"workspace": str(tmp_path / "main")},
        "agents": {"work": {"workspace": str(tmp_path / "link" / "sub")}},
    }
    assert "agents.work.workspace" in error(data) and "is inside agent.workspace" in error(data)


def test_a_workspace_under_home_is_compared_after_expansion(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    data = {
        "agent": {"workspace": str(tmp_path / "ws")},
        "agents": {"work": {"workspace": "~/ws/work"}},
    }
    assert "agents.work.workspace" in error(data)
    data["agents"]["work"]["workspace"] = "~/work"
    assert agent_config(parse_config(data), "work").agent.workspace == tmp_path / "work"


def test_two_other_agents_sharing_a_workspace_are_refused(tmp_path):
    data = {
        "agent": {"workspace": str(tmp_path / "main")},
        "agents": {
            "work": {"workspace": str(tmp_path / "team")},
            "play": {"workspace": str(tmp_path / "team")},
        },
    }
    assert "agents.play.workspace" in error(data) and "agents.work.workspace" in error(data)


@pytest.mark.parametrize(
    "channel, base, account, key",
    [
        ("telegram", {}, {}, "channels.telegram.accounts.work.token_env"),
        (
            "telegram",
            {"token_env": "A"},
            {"token_env": "A"},
            "channels.telegram.accounts.work.token_env",
        ),
        ("discord", {}, {}, "channels.discord.accounts.work.token_env"),
        ("slack", {}, {"bot_token_env": "SB2"}, "channels.slack.accounts.work.app_token_env"),
        ("slack", {}, {"app_token_env": "SA2"}, "channels.slack.accounts.work.bot_token_env"),
        (
            "slack",
            {"mode": "http"},
            {"bot_token_env": "SB2", "signing_secret_env": "SS2"},
            "channels.slack.accounts.work.listen",
        ),
        ("signal", {"account": "+15550001"}, {}, "channels.signal.accounts.work.account"),
    ],
)
def test_two_accounts_on_one_connection_are_refused(channel, base, account, key):
    section = {"enabled": True, **base, "accounts": {"work": account}}
    said = error({"channels": {channel: section}})
    assert f"{key}: " in said and "(account 'default')" in said


@pytest.mark.parametrize(
    "channel, account",
    [
        ("telegram", {"token_env": "WORK_BOT_TOKEN"}),
        ("discord", {"token_env": "WORK_DISCORD"}),
        ("slack", {"bot_token_env": "SB2", "app_token_env": "SA2"}),
        ("slack", {"bot_token_env": "SB2", "app_token_env": "SA2", "mode": "socket"}),
        ("signal", {"account": "+15550002"}),
        ("telegram", {"enabled": False}),  # an account that is off connects to nothing
    ],
)
def test_accounts_on_their_own_connections_load(channel, account):
    base = {"account": "+15550001"} if channel == "signal" else {}
    cfg = parse_config(
        {"channels": {channel: {"enabled": True, **base, "accounts": {"work": account}}}}
    )
    assert "work" in cfg.channels.model_dump()[channel]["accounts"]


def test_two_named_accounts_sharing_a_token_variable_are_refused():
    section = {
        "enabled": True,
        "accounts": {"a": {"token_env": "SAME"}, "b": {"token_env": "SAME"}},
    }
    said = error({"channels": {"telegram": section}})
    assert "channels.telegram.accounts.b.token_env: SAME is also" in said
    assert "channels.telegram.accounts.a.token_env" in said


def test_an_account_named_default_is_refused():
    section = {"enabled": True, "accounts": {"default": {"token_env": "OTHER"}}}
    said = error({"channels": {"telegram": section}})
    assert "channels.telegram.accounts.default: the account 'default' is the channel's own" in said


@pytest.mark.parametrize("name", ["wo:rk", "a b", ""])
def test_an_account_name_is_plain(name):
    section = {"enabled": True, "accounts": {name: {"token_env": "OTHER"}}}
    assert f"channels.telegram.accounts.{name}: use letters" in error(
        {"channels": {"telegram": section}}
    )


def test_an_account_has_no_accounts_of_its_own():
    inner = {"token_env": "OTHER", "accounts": {"x": {"token_env": "X"}}}
    section = {"enabled": True, "accounts": {"work": inner}}
    said = error({"channels": {"telegram": section}})
    assert "channels.telegram.accounts.work.accounts: an account has no accounts" in said


def test_the_http_api_takes_no_accounts():
    said = error({"channels": {"http": {"accounts": {"work": {}}}}})
    assert "channels.http.accounts: unknown key" in said


def test_an_unknown_key_in_an_account_is_named():
    section = {"accounts": {"work": {"tokn_env": "X"}}}
    assert "channels.telegram.accounts.work.tokn_env: unknown key" in error(
        {"channels": {"telegram": section}}
    )


def test_a_cron_jobs_agent_must_exist(tmp_path):
    job = {"name": "j", "every": "1h", "prompt": "p", "agent": "play"}
    data = two_agents(tmp_path) | {"cron": [job]}
    assert "cron[0].agent: unknown agent 'play' (agents: main, work)" in error(data)
    job["agent"] = "work"
    assert parse_config(data).cron[0].agent == "work"


def test_every_messaging_sections_accounts_are_of_its_own_class():
    # a new channel's section narrows `accounts` to itself, or its account tables would
    # refuse the channel's own keys
    from typing import get_args

    from bot.config.channels import MESSAGING, SECTIONS

    for name in MESSAGING:
        cls = SECTIONS[name]
        assert get_args(cls.model_fields["accounts"].annotation)[1] is cls, name
