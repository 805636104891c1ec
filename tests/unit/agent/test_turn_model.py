"""The Runtime line names the session's model and thinking level (SPEC §17.2, §17.3), and
the prompt cache keeps one prompt per choice: a session on another model never makes the
default sessions' prompt rebuild."""

from __future__ import annotations

from pathlib import Path

from bot.agent.context import prompt_context
from bot.agent.request import TurnRequest
from bot.config import parse_config
from bot.model.choice import CHOICE, Choice
from bot.prompt.cache import PromptCache
from bot.prompt.context import RuntimeInfo


def runtime_line(text: str) -> str:
    return next(line for line in text.splitlines() if line.startswith("Runtime: "))


def ctx_for(cfg, key: str):
    req = TurnRequest(session_key=key, user_text="", channel="telegram", chat_type="direct")
    return prompt_context(cfg, req, (), "", RuntimeInfo())


def test_the_runtime_line_follows_the_sessions_choice_and_the_cache_keeps_both(tmp_path: Path):
    cfg = parse_config(
        {
            "agent": {
                "workspace": str(tmp_path / "ws"),
                "state_dir": str(tmp_path / "state"),
                "model": "openai/main-model",
                "thinking": "low",
                "models": {"fast": "openai/fast-model"},
            }
        }
    )
    (tmp_path / "ws").mkdir()
    cache = PromptCache(watch=False)
    default = cache.get(ctx_for(cfg, "a"))
    line = runtime_line(default.text)
    assert "model=openai/main-model" in line and line.endswith("thinking=low")
    token = CHOICE.set(Choice(object(), "openai/fast-model", "high"))
    try:
        chosen = cache.get(ctx_for(cfg, "b"))
    finally:
        CHOICE.reset(token)
    line = runtime_line(chosen.text)
    assert "model=openai/fast-model" in line and "default_model=openai/main-model" in line
    assert line.endswith("thinking=high")
    token = CHOICE.set(Choice(object(), "openai/main-model", ""))  # /think off
    try:
        assert runtime_line(cache.get(ctx_for(cfg, "c")).text).endswith("thinking=off")
    finally:
        CHOICE.reset(token)
    builds = cache.builds
    again = cache.get(ctx_for(cfg, "d"))  # another session on the defaults
    assert again is default and cache.builds == builds  # no rebuild for it
