"""``[memory]``: per-agent override, which key the embedding endpoint gets, and chela check's
warning for a named but empty key variable."""

from __future__ import annotations

from bot.cli.validate import embedding_key_problems
from bot.config import agent_config, parse_config
from bot.memory.embed import embedding_target


def cfg(memory: dict, agent: dict | None = None, **more):
    base = {"model": "openai/gpt-4o-mini", "api_key_env": "AGENT_KEY_T", **(agent or {})}
    return parse_config({"agent": base, "memory": memory, **more})


def test_no_embedding_model_is_full_text_only():
    assert embedding_target(cfg({})) is None


def test_an_agent_may_set_its_own_embedding_model(tmp_path):
    c = cfg(
        {"embedding_model": "openai/text-embedding-3-small"},
        agents={
            "w": {"workspace": str(tmp_path / "w"), "memory": {"embedding_model": "openai/e2"}}
        },
    )
    assert embedding_target(agent_config(c, "w")).model == "openai/e2"
    assert embedding_target(c).model == "openai/text-embedding-3-small"  # twin: the default


def test_the_endpoint_gets_only_its_own_key(monkeypatch):
    monkeypatch.setenv("AGENT_KEY_T", "agent-secret")
    monkeypatch.setenv("EMB_KEY_T", "emb-secret")
    own = cfg({"embedding_model": "openai/e", "embedding_api_key_env": "EMB_KEY_T"})
    assert embedding_target(own).api_key == "emb-secret"
    same = cfg({"embedding_model": "openai/e"})  # the agent's endpoint: the agent's key
    assert embedding_target(same).api_key == "agent-secret"
    other_base = cfg({"embedding_model": "openai/e", "embedding_api_base": "http://emb:8080/v1"})
    assert embedding_target(other_base).api_key == "sk-local"  # never the agent's key
    other_provider = cfg({"embedding_model": "gemini/text-embedding-004"})
    assert embedding_target(other_provider).api_key == ""  # the provider's own variable


def test_check_warns_of_an_empty_key_variable(monkeypatch):
    monkeypatch.delenv("EMB_KEY_T", raising=False)
    c = cfg({"embedding_model": "openai/e", "embedding_api_key_env": "EMB_KEY_T"})
    (line,) = embedding_key_problems(c)
    assert line.startswith("memory.embedding_api_key_env: environment variable EMB_KEY_T")
    monkeypatch.setenv("EMB_KEY_T", "x")  # twin: set, nothing said
    assert embedding_key_problems(c) == []
