"""``chela doctor`` names the path each configured model takes (SPEC §12, issue 28): the
light path (Chela's own Chat Completions client) or litellm, for the main model, each
fallback, each ``[agent.models]`` alias, the compaction model, transcription and speech."""

from __future__ import annotations

import asyncio

CONFIG = """
[agent]
workspace = "{ws}"
state_dir = "{state}"
model = "openai/gpt-4o-mini"
fallbacks = [
  "anthropic/claude-3-5-haiku-latest",
  {{ model = "hosted_vllm/qwen", api_base = "http://127.0.0.1:9/v1" }},
  "hosted_vllm/no-base",
]
[agent.models]
fast = "groq/llama-3.1-8b-instant"
local = "openai/llama3"
[media]
transcription_model = "openai/whisper-1"
tts_model = "openai/tts-1"
"""


def _doctor_lines(tmp_path, text: str) -> list[str]:
    """The model-path lines of ``chela doctor`` (its static part: the live probes would
    reach for the network)."""
    from bot.cli.doctor import doctor
    from bot.config import load_config

    p = tmp_path / "c.toml"
    p.write_text(text.format(ws=tmp_path / "ws", state=tmp_path / "state"))
    findings = asyncio.run(doctor(load_config(str(p)), live=False))
    return [f.line() for f in findings if f.subject == "model path"]


def test_doctor_names_each_models_path(tmp_path, monkeypatch):
    monkeypatch.delenv("CHELA_MODEL_PATH", raising=False)
    lines = _doctor_lines(tmp_path, CONFIG)
    light, lite = "light (Chela's own client)", "litellm"
    assert lines == [
        f"OK    model path: agent.model = openai/gpt-4o-mini: {light}",
        f"OK    model path: agent.fallbacks[0] = anthropic/claude-3-5-haiku-latest: {lite}",
        f"OK    model path: agent.fallbacks[1] = hosted_vllm/qwen: {light}",
        f"OK    model path: agent.fallbacks[2] = hosted_vllm/no-base: {lite}",
        f"OK    model path: agent.models.fast = groq/llama-3.1-8b-instant: {lite}",
        f"OK    model path: agent.models.local = openai/llama3: {light}",
        f"OK    model path: media.transcription_model = openai/whisper-1: {lite}",
        f"OK    model path: media.tts_model = openai/tts-1: {lite}",
    ]


def test_doctor_model_path_switch_sends_all_through_litellm(tmp_path, monkeypatch):
    monkeypatch.setenv("CHELA_MODEL_PATH", "litellm")
    lines = _doctor_lines(
        tmp_path, '[agent]\nworkspace = "{ws}"\nstate_dir = "{state}"\nmodel = "openai/x"\n'
    )
    assert lines == ["OK    model path: agent.model = openai/x: litellm"]
