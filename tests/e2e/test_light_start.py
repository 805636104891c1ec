"""A config whose models all speak the Chat Completions protocol runs without litellm
(issue 28: litellm costs ~160 MB and 1-4 s to import): `chela run` answers a Telegram DM
through Chela's own client and never loads litellm's native libraries; a config with a model
only litellm serves still loads it (the twin)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.e2e import TG_TOKEN, config_file, telegram_section
from tests.fakes.llm import text

ROOT = Path(__file__).resolve().parents[2]
# shared objects only litellm's import brings in (its tokenizers), never Chela's own path
LITELLM_ONLY = ("_tiktoken", "tokenizers.abi3")


def loaded_litellm(pid: int) -> bool:
    maps = Path(f"/proc/{pid}/maps").read_text()
    return any(name in maps for name in LITELLM_ONLY)


async def answer_one_dm(tmp_path: Path, llm, tg, extra: str = "") -> bool:
    cfg = config_file(
        tmp_path / "config.toml",
        llm,
        workspace=tmp_path / "ws",
        state_dir=tmp_path / "state",
        channels=telegram_section(tg),
    )
    if extra:
        cfg.write_text(cfg.read_text().replace("[heartbeat]", extra + "\n[heartbeat]", 1))
    env = {**os.environ, "TEST_TG_TOKEN": TG_TOKEN, "PYTHONPATH": str(ROOT)}
    env.pop("CHELA_MODEL_PATH", None)
    cmd = [sys.executable, "-m", "bot", "run", "--config", str(cfg)]
    llm.script(text("hello from the light path"))
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        tg.inject_message(42, "hi", from_id=42)
        sent = await tg.wait_for_sent(1, timeout=60)
        assert sent[0].visible_text == "hello from the light path"
        return loaded_litellm(proc.pid)
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()


async def test_an_openai_compatible_config_answers_without_litellm(tmp_path, llm, tg):
    assert not await answer_one_dm(tmp_path, llm, tg)


async def test_twin_a_model_only_litellm_serves_loads_it(tmp_path, llm, tg):
    fallback = '[[agent.fallbacks]]\nmodel = "anthropic/claude-3-5-haiku-latest"\napi_key_env = "TEST_TG_TOKEN"\n'
    assert await answer_one_dm(tmp_path, llm, tg, extra=fallback)
