"""Which path serves a model: the registry's rule (first row that serves it wins, litellm
last) and the ``CHELA_MODEL_PATH`` switch."""

from __future__ import annotations

from bot.model.paths import PATH_ENV, needs_litellm, path_for


def test_path_rule(monkeypatch):
    monkeypatch.delenv(PATH_ENV, raising=False)

    def name(model: str, api_base: str = "") -> str:
        return path_for(model, api_base).name

    assert name("openai/gpt-4o") == "openai_compat"
    assert name("openai/llama3", "http://localhost:8080/v1") == "openai_compat"
    assert name("custom_openai/x") == "openai_compat"
    assert name("hosted_vllm/qwen", "http://gpu:8000/v1") == "openai_compat"
    assert name("hosted_vllm/qwen") == "litellm"  # no api_base: litellm's own default
    assert name("lm_studio/qwen", "http://x/v1") == "openai_compat"
    for model in (
        "openai/o3-mini",
        "openai/gpt-5",
        "anthropic/claude-sonnet-4",
        "ollama_chat/llama3",
        "gemini/x",
        "gpt-4o",
    ):
        assert name(model, "http://x") == "litellm"


def test_needs_litellm(monkeypatch):
    monkeypatch.delenv(PATH_ENV, raising=False)

    assert not needs_litellm([("openai/gpt-4o", ""), ("hosted_vllm/q", "http://x/v1"), ("", "")])
    assert needs_litellm([("openai/gpt-4o", ""), ("anthropic/claude-sonnet-4", "")])


def test_path_env_sends_everything_through_litellm(monkeypatch):
    monkeypatch.setenv(PATH_ENV, "litellm")
    assert path_for("openai/gpt-4o").name == "litellm"
