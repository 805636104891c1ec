"""`chela check` and `chela run` agree on every config (issue 27 #3, #4): the same errors
make check exit 1 and run refuse before "ready", the same warnings are printed by one and
logged by the other, in the same words."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.e2e import eventually
from tests.e2e.test_first_hour import chela, env, stop

MISSING = "CHELA_TEST_SURELY_UNSET_KEY"


def write_config(tmp_path: Path, agent: dict, tools: dict | None = None) -> Path:
    sections = {
        "agent": {
            "workspace": str(tmp_path / "ws"),
            "state_dir": str(tmp_path / "state"),
            **agent,
        },
        "heartbeat": {"every": "0m"},
        **({"tools": tools} if tools else {}),
    }
    lines = []
    for name, values in sections.items():
        lines.append(f"[{name}]")
        lines += [f"{k} = {json.dumps(v)}" for k, v in values.items()]
    path = tmp_path / "config.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


async def run_daemon(cfg: Path, tmp_path: Path, **extra: str) -> tuple[str, int | None]:
    """Start `chela run`; return its log once it is ready (then stopped) or has exited."""
    log = tmp_path / "run.log"
    proc = subprocess.Popen(
        [sys.executable, "-m", "bot", "run", "--config", str(cfg)],
        env=env(**extra),
        stdout=subprocess.DEVNULL,
        stderr=log.open("w"),
    )
    try:
        await eventually(
            lambda: proc.poll() is not None or "ready in" in log.read_text(), timeout=60
        )
        refused = proc.poll()
    finally:
        stop(proc)
    return log.read_text(), refused


async def test_a_model_without_provider_is_refused_by_both_in_the_same_words(tmp_path, llm):
    cfg = write_config(tmp_path, {"model": "llama3.2", "api_base": llm.base_url})
    c = await chela("check", "--config", str(cfg))
    assert c.returncode == 1 and "agent.model = 'llama3.2'" in c.stderr
    assert "config: OK" not in c.stdout and f"config: {cfg}: OK" not in c.stdout
    out, rc = await run_daemon(cfg, tmp_path)
    assert rc == 1 and "ready in" not in out
    said = c.stderr.split("error: ", 1)[1].strip()
    assert said in out


async def test_a_routable_model_passes_both(tmp_path, llm):
    cfg = write_config(tmp_path, {"model": "openai/fake-model", "api_base": llm.base_url})
    c = await chela("check", "--config", str(cfg))
    assert c.returncode == 0 and c.stdout.rstrip().endswith("config: OK"), c.stdout + c.stderr
    out, rc = await run_daemon(cfg, tmp_path)
    assert rc is None and "ready in" in out


async def test_an_unknown_tool_is_the_same_warning_from_both(tmp_path, llm):
    cfg = write_config(
        tmp_path,
        {"model": "openai/fake-model", "api_base": llm.base_url},
        tools={"enabled": ["read", "reed"]},
    )
    c = await chela("check", "--config", str(cfg))
    assert c.returncode == 0, c.stderr
    [warning] = [ln for ln in c.stdout.splitlines() if "'reed'" in ln]
    assert warning.startswith("warning: tools.enabled: unknown tool 'reed'")
    out, rc = await run_daemon(cfg, tmp_path)
    assert rc is None and warning.removeprefix("warning: ") in out


async def test_an_unset_key_variable_is_named_by_both(tmp_path):
    cfg = write_config(
        tmp_path, {"model": "anthropic/claude-3-5-haiku-latest", "api_key_env": MISSING}
    )
    c = await chela("check", "--config", str(cfg))
    assert c.returncode == 1 and f"export {MISSING}=..." in c.stderr, c.stdout + c.stderr
    out, rc = await run_daemon(cfg, tmp_path)
    assert rc == 1 and f"export {MISSING}=..." in out and "ready in" not in out


async def test_a_set_key_variable_passes_and_a_local_server_only_warns(tmp_path, llm):
    cfg = write_config(
        tmp_path, {"model": "anthropic/claude-3-5-haiku-latest", "api_key_env": MISSING}
    )
    c = await chela("check", "--config", str(cfg), env_extra={MISSING: "sk-test"})
    assert c.returncode == 0 and MISSING not in c.stdout + c.stderr
    cfg = write_config(
        tmp_path,
        {"model": "openai/fake-model", "api_base": llm.base_url, "api_key_env": MISSING},
    )
    c = await chela("check", "--config", str(cfg))
    assert c.returncode == 0 and f"warning: agent.api_key_env: environment variable {MISSING}" in (
        c.stdout
    )
