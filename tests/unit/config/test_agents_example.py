"""The commented "several agents and accounts" example of config.example.toml, uncommented,
loads and routes as its comments say (so the example cannot rot)."""

from __future__ import annotations

import tomllib
from pathlib import Path

from bot.config import agent_config, channel_accounts, parse_config
from bot.rules.routing import accounts_of_agent, route

ROOT = Path(__file__).resolve().parents[3]


def example_block() -> str:
    text = (ROOT / "config.example.toml").read_text()
    start = text.index("# [agents.work]")
    lines = []
    for line in text[start:].splitlines():
        if not line.startswith("#"):
            break
        lines.append(line.removeprefix("#").removeprefix(" "))
    return "\n".join(lines)


def test_the_commented_example_loads_and_routes(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    data = tomllib.loads(example_block())
    data["channels"]["telegram"] |= {"enabled": True}
    cfg = parse_config(data)
    work = agent_config(cfg, "work")
    assert work.agent.workspace == tmp_path / ".chela" / "work"
    assert work.tools.enabled == ["read", "memory_search", "memory_get", "web_fetch"]
    assert work.agent.model == "anthropic/claude-sonnet-4-5"
    assert work.agent.timezone == cfg.agent.timezone  # inherited
    assert channel_accounts(cfg, "telegram")["work"].token_env == "WORK_BOT_TOKEN"
    assert route(cfg.bindings, "main", "telegram", "work", "5", "5") == "work"
    assert route(cfg.bindings, "main", "telegram", "default", "-1001234567890", "5") == "work"
    assert route(cfg.bindings, "main", "telegram", "default", "5", "5") == "main"
    assert accounts_of_agent(cfg, "work") == {("telegram", "work"), ("telegram", "default")}
    assert accounts_of_agent(cfg, "main") == {("telegram", "default")}


def readme_config() -> str:
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Several agents and accounts") :]
    return section[section.index("```toml\n") + 8 : section.index("```\n", 8)]


def test_the_readme_worked_config_loads_and_routes_as_it_says(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    cfg = parse_config(tomllib.loads(readme_config()))
    group, person = "-1001234567890", "777002"
    for account in ("default", "work"):
        assert route(cfg.bindings, "main", "telegram", account, group, "9") == "work"
        assert route(cfg.bindings, "main", "telegram", account, group, person) == "main"
    assert route(cfg.bindings, "main", "telegram", "work", "777001", "777001") == "work"
    assert route(cfg.bindings, "main", "telegram", "default", "777001", "777001") == "main"
    assert channel_accounts(cfg, "telegram")["work"].groups == [group]  # inherited
    assert agent_config(cfg, "work").agent.daily_cost_limit_usd == 1.0
