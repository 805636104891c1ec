"""The verdict `chela check` and `chela run` share, with several agents and accounts: each
agent's model and key variables and each enabled account's token are judged under their own
TOML key; a value an agent inherits is judged once, under [agent]'s key."""

from __future__ import annotations

import pytest

from bot.cli.validate import validate
from bot.config import parse_config

UNSET = "CFG36_VERDICT_SURELY_UNSET"


@pytest.fixture(autouse=True)
def model_key(monkeypatch):
    monkeypatch.setenv("CFG36_KEY", "sk-cfg36-test-key")
    monkeypatch.delenv(UNSET, raising=False)


def verdict(data: dict) -> tuple[list[str], list[str]]:
    v = validate(parse_config(data))
    return v.errors, v.warnings


def agents(**work: object) -> dict:
    return {
        "agent": {
            "workspace": "/tmp/cfg36-v-main",
            "model": "openai/gpt-4o-mini",
            "api_key_env": "CFG36_KEY",
        },
        "agents": {"work": {"workspace": "/tmp/cfg36-v-work", **work}},
    }


def test_an_agents_own_model_is_judged_under_its_key():
    errors, _ = verdict(agents(model="llama3.2"))
    assert (
        [e for e in errors if "llama3.2" in e]
        == [
            e
            for e in errors
            if e.startswith("agents.work.model = 'llama3.2': litellm cannot route")
        ]
        != []
    )
    errors, _ = verdict(agents(model="anthropic/claude-sonnet-4-5", api_key_env="CFG36_KEY"))
    assert not [e for e in errors if "agents.work" in e]


def test_an_inherited_model_is_judged_once_under_agent():
    data = agents()
    data["agent"]["model"] = "llama3.2"
    errors, _ = verdict(data)
    said = [e for e in errors if "llama3.2" in e]
    assert len(said) == 1 and said[0].startswith("agent.model = 'llama3.2'")


def test_an_agents_empty_key_variable_is_named():
    errors, _ = verdict(agents(api_key_env=UNSET))
    assert any(
        e.startswith(f"agents.work.api_key_env: environment variable {UNSET} is empty")
        for e in errors
    )


def test_an_agents_unknown_tool_is_named_and_inherited_names_are_not_repeated():
    data = agents(tools={"enabled": ["read", "reed"]})
    data["tools"] = {"guest": ["session_status", "sesion_status"]}
    _, warnings = verdict(data)
    assert any(w.startswith("agents.work.tools.enabled: unknown tool 'reed'") for w in warnings)
    assert [w for w in warnings if "sesion_status" in w] == [
        w for w in warnings if w.startswith("tools.guest: unknown tool 'sesion_status'")
    ]
    assert len([w for w in warnings if "sesion_status" in w]) == 1


def test_an_enabled_accounts_empty_token_is_an_error_naming_the_account(monkeypatch):
    monkeypatch.setenv("CFG36_MAIN_TOKEN", "1:main")
    tg = {
        "enabled": True,
        "token_env": "CFG36_MAIN_TOKEN",
        "accounts": {"work": {"token_env": UNSET}},
    }
    errors, _ = verdict({"channels": {"telegram": tg}})
    assert errors == [
        f"channels.telegram.accounts.work.token_env: environment variable {UNSET} is empty and "
        f"the account is enabled: export {UNSET}=... (or set "
        "channels.telegram.accounts.work.enabled = false)"
    ]
    monkeypatch.setenv(UNSET, "2:work")
    assert verdict({"channels": {"telegram": tg}})[0] == []


def test_a_binding_to_an_account_that_is_off_is_a_warning():
    tg = {"enabled": False, "accounts": {"work": {"token_env": "CFG36_W"}}}
    bind = {"agent": "work", "channel": "telegram", "account": "work"}
    data = agents() | {"channels": {"telegram": tg}, "bindings": [bind]}
    _, warnings = verdict(data)
    assert (
        "bindings[0]: matches no message while channels.telegram.accounts.work.enabled is false"
        in warnings
    )
    bind2 = {"agent": "work", "channel": "discord"}
    _, warnings = verdict(data | {"bindings": [bind2]})
    assert "bindings[0]: matches no message while channels.discord.enabled is false" in warnings
    tg["accounts"]["work"]["enabled"] = True
    _, warnings = verdict(data)
    assert not [w for w in warnings if w.startswith("bindings")]
