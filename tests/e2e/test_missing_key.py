"""The default model with no key (issue 37 #4): ``chela check`` and ``chela run`` warn before
the first message, and every message that names a key variable names the model's own
provider's (``openai/…`` → ``OPENAI_API_KEY``), never another's: check, run, the first
request (``chela chat -m``) and ``chela doctor``, each through the real CLI."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

from tests.e2e import eventually
from tests.e2e.test_check_run_agree import write_config
from tests.e2e.test_first_hour import ROOT, stop

KEY_VARS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY")
BASES = ("OPENAI_BASE_URL", "OPENAI_API_BASE")


def clean_env(**extra: str) -> dict:
    """This process's environment with no provider key and no provider base."""
    out = {k: v for k, v in os.environ.items() if k not in KEY_VARS + BASES}
    return {**out, "PYTHONPATH": str(ROOT), **extra}


async def cli(*argv: str, **extra: str) -> subprocess.CompletedProcess:
    return await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "bot", *argv],
        env=clean_env(**extra),
        capture_output=True,
        text=True,
        timeout=90,
    )


async def run_until_ready(cfg: Path, tmp_path: Path) -> str:
    """``chela run``'s log up to its ready line (then stopped)."""
    log = tmp_path / "run.log"
    proc = subprocess.Popen(
        [sys.executable, "-m", "bot", "run", "--config", str(cfg)],
        env=clean_env(),
        stdout=subprocess.DEVNULL,
        stderr=log.open("w"),
    )
    try:
        await eventually(
            lambda: proc.poll() is not None or "ready in" in log.read_text(), timeout=60
        )
        assert proc.poll() is None, log.read_text()
    finally:
        stop(proc)
    return log.read_text()


async def test_default_model_without_a_key_is_warned_with_openais_variable(tmp_path):
    cfg = write_config(tmp_path, {"model": "openai/gpt-4o-mini", "api_key_env": ""})
    c = await cli("check", "--config", str(cfg))
    assert c.returncode == 0, c.stdout + c.stderr  # a warning, not an error
    (warning,) = [line for line in c.stdout.splitlines() if "API key" in line]
    assert warning.startswith("warning: agent.model = 'openai/gpt-4o-mini'")
    assert "export OPENAI_API_KEY=..." in warning and "ANTHROPIC" not in c.stdout
    # chela run says the same before it is ready (before any first message)
    out = await run_until_ready(cfg, tmp_path)
    said = warning.removeprefix("warning: ")
    assert said in out and out.index(said) < out.index("ready in")
    # the first request, through the terminal chat: the reply names OpenAI's variable
    chat = await cli("chat", "--config", str(cfg), "-m", "hi")
    assert chat.returncode != 0
    assert "OPENAI_API_KEY" in chat.stderr + chat.stdout
    assert "ANTHROPIC" not in chat.stderr + chat.stdout
    doctor = await cli("doctor", "--config", str(cfg))
    assert "OPENAI_API_KEY" in doctor.stdout and "ANTHROPIC" not in doctor.stdout + doctor.stderr


async def test_each_provider_is_named_by_its_own_variable(tmp_path):
    cfg = write_config(
        tmp_path,
        {
            "model": "anthropic/claude-3-5-haiku-latest",
            "fallbacks": ["gemini/gemini-2.0-flash"],
        },
    )
    c = await cli("check", "--config", str(cfg))
    warnings = [line for line in c.stdout.splitlines() if "API key" in line]
    assert len(warnings) == 2, c.stdout
    assert "export ANTHROPIC_API_KEY=..." in warnings[0] and "OPENAI" not in warnings[0]
    assert warnings[1].startswith("warning: agent.fallbacks[0].model = 'gemini/")
    assert "export GEMINI_API_KEY=..." in warnings[1]
    # with both failing, the turn's answer names no variable at all (never OpenAI's)
    chat = await cli("chat", "--config", str(cfg), "-m", "hi")
    assert "no API key" in chat.stderr and "OPENAI_API_KEY" not in chat.stderr + chat.stdout
    alone = write_config(tmp_path, {"model": "anthropic/claude-3-5-haiku-latest"})
    chat = await cli("chat", "--config", str(alone), "-m", "hi")
    said = chat.stderr + chat.stdout
    assert "ANTHROPIC_API_KEY" in said and "OPENAI_API_KEY" not in said


async def test_no_warning_when_a_key_or_a_local_server_is_there(tmp_path, llm):
    """The twins: the provider's own variable set, a named variable set, a local server:
    no warning, and the model answers."""
    default = write_config(tmp_path, {"model": "openai/gpt-4o-mini", "api_key_env": ""})
    c = await cli("check", "--config", str(default), OPENAI_API_KEY="sk-test")
    assert c.returncode == 0 and "API key" not in c.stdout, c.stdout
    named = write_config(tmp_path, {"model": "openai/gpt-4o-mini", "api_key_env": "MY_KEY"})
    c = await cli("check", "--config", str(named), MY_KEY="sk-test")
    assert c.returncode == 0 and "API key" not in c.stdout, c.stdout
    local = write_config(tmp_path, {"model": "openai/fake-model", "api_base": llm.base_url})
    c = await cli("check", "--config", str(local))
    assert c.returncode == 0 and "API key" not in c.stdout, c.stdout
    llm.script("hello there")
    chat = await cli("chat", "--config", str(local), "-m", "hi")
    assert chat.returncode == 0 and "hello there" in chat.stdout, chat.stderr
