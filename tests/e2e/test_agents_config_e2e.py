"""Several agents and accounts: every config error of theirs is refused by `chela check` and by
`chela run` (before "ready") in the same words, naming the TOML key; the valid twin passes both.
Never "first wins", never a silent fallback to the default agent."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.test_check_run_agree import run_daemon
from tests.e2e.test_first_hour import chela

UNSET = "CHELA_TEST_CFG36_SURELY_UNSET"


def base(tmp_path: Path, llm_url: str) -> str:
    return f"""
[agent]
workspace = "{tmp_path / "ws-main"}"
state_dir = "{tmp_path / "state"}"
model = "openai/fake-model"
api_base = "{llm_url}"

[heartbeat]
every = "0m"

[agents.work]
workspace = "{tmp_path / "ws-work"}"
name = "Workbot"
[agents.work.tools]
enabled = ["read", "memory_search", "memory_get"]

[channels.telegram]
enabled = false
token_env = "TEST_TG_TOKEN"
allow_from = ["777001"]
[channels.telegram.accounts.work]
token_env = "CFG36_WORK_TOKEN"
"""


VALID_BINDING = """
[[bindings]]
agent = "work"
channel = "telegram"
account = "work"
"""

# (what, TOML appended to the base, the line both commands print)
CASES = [
    (
        "unknown agent",
        '[[bindings]]\nagent = "wrok"\nchannel = "telegram"\n',
        "bindings[0].agent: unknown agent 'wrok' (agents: main, work)",
    ),
    (
        "unknown account",
        '[[bindings]]\nagent = "work"\nchannel = "telegram"\naccount = "home"\n',
        "bindings[0].account: channels.telegram has no account 'home'",
    ),
    (
        "tie",
        VALID_BINDING + '[[bindings]]\nagent = "main"\nchannel = "telegram"\naccount = "work"\n',
        "bindings[0] and bindings[1]: both match channel=telegram account=work",
    ),
    (
        "same workspace",
        '[agents.play]\nworkspace = "{ws}/ws-work"\n',
        "agents.play.workspace: {ws}/ws-work is the same folder as agents.work.workspace",
    ),
    (
        "nested workspace",
        '[agents.play]\nworkspace = "{ws}/ws-main/play"\n',
        "agents.play.workspace: {ws}/ws-main/play is inside agent.workspace",
    ),
    (
        "shared token variable",
        '[channels.telegram.accounts.home]\nenabled = true\ntoken_env = "CFG36_SHARED"\n'
        '[channels.telegram.accounts.team]\nenabled = true\ntoken_env = "CFG36_SHARED"\n',
        "channels.telegram.accounts.team.token_env: CFG36_SHARED is also "
        "channels.telegram.accounts.home.token_env",
    ),
    (
        "the default agent's id",
        '[agents.main]\nworkspace = "{ws}/ws-other"\n',
        "agents.main: 'main' is the default agent's id",
    ),
    (
        "id inside an agent",
        '[agents.play]\nworkspace = "{ws}/ws-play"\nid = "play"\n',
        "agents.play.id: an agent's id is its table name",
    ),
    (
        "state_dir inside an agent",
        '[agents.play]\nworkspace = "{ws}/ws-play"\nstate_dir = "{ws}/elsewhere"\n',
        "agents.play.state_dir: the state dir is the daemon's",
    ),
    (
        "an account named default",
        '[channels.telegram.accounts.default]\ntoken_env = "CFG36_OTHER"\n',
        "channels.telegram.accounts.default: the account 'default' is the channel's own table",
    ),
    (
        "an accounts table on the HTTP API",
        '[channels.http.accounts.work]\nlisten = "127.0.0.1:9"\n',
        "channels.http.accounts: unknown key",
    ),
    (
        "an enabled account without its token",
        f'[channels.telegram.accounts.home]\nenabled = true\ntoken_env = "{UNSET}"\n',
        f"channels.telegram.accounts.home.token_env: environment variable {UNSET} is empty "
        "and the account is enabled",
    ),
    (
        "an agent's model litellm cannot route",
        '[agents.play]\nworkspace = "{ws}/ws-play"\nmodel = "llama3.2"\n',
        "agents.play.model = 'llama3.2': litellm cannot route this model string",
    ),
]


def write(tmp_path: Path, llm_url: str, extra: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(base(tmp_path, llm_url) + "\n" + extra.replace("{ws}", str(tmp_path)))
    return path


@pytest.mark.parametrize("what, extra, line", CASES, ids=[c[0] for c in CASES])
async def test_check_and_run_refuse_naming_the_key(tmp_path, llm, what, extra, line):
    tmp_path = tmp_path.resolve()
    line = line.replace("{ws}", str(tmp_path))
    cfg = write(tmp_path, llm.base_url, extra)
    c = await chela("check", "--config", str(cfg))
    assert c.returncode == 1 and line in c.stderr, c.stdout + c.stderr
    out, rc = await run_daemon(cfg, tmp_path)
    assert rc == 1 and "ready in" not in out
    assert line in out


async def test_the_valid_twin_passes_both(tmp_path, llm):
    cfg = write(tmp_path.resolve(), llm.base_url, VALID_BINDING)
    c = await chela("check", "--config", str(cfg))
    assert c.returncode == 0 and c.stdout.rstrip().endswith("config: OK"), c.stdout + c.stderr
    out, rc = await run_daemon(cfg, tmp_path)
    assert rc is None and "ready in" in out, out
