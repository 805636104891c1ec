"""The agent's sandboxed `exec` cannot reach the Control UI's login codes (SPEC §16.2): the
state dir is invisible in the sandbox, so a command the model runs can neither read a code's
hash nor plant a code of its own.  The same commands without the sandbox do both, which is
what shows this test can fail."""

from __future__ import annotations

import hashlib
import os

import pytest

from bot.agent.tools.sandbox import probe
from tests.e2e import telegram_section
from tests.e2e.ui_client import mint_code, ui_config, ui_daemon
from tests.fakes.llm import text, tool_calls

OWNER = 42
FORGED = "ForgedLoginCode0123456"  # 22 characters of the code alphabet


@pytest.fixture
def sandbox():
    status = probe()
    if not status.ok:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must have a working sandbox: {status.detail} {status.fix}")
        pytest.skip(f"no working sandbox here: {status.detail}")
    return status


def _results(request: dict) -> str:
    return "\n".join(m["content"] for m in request["messages"] if m.get("role") == "tool")


@pytest.mark.parametrize("sandboxed", [True, False])
async def test_exec_can_neither_read_nor_plant_a_login_code(tmp_path, llm, tg, sandbox, sandboxed):
    tools = {"exec": {"security": "full", **({} if sandboxed else {"sandbox": "off"})}}
    cfg = ui_config(tmp_path, llm, channels=telegram_section(tg), tools=tools)
    db = cfg.db_path
    read = f"ls -la {cfg.agent.state_dir}; cat {db}* | grep -a -o '[0-9a-f]\\{{64\\}}'"
    plant = (
        f"python3 -c \"import sqlite3, hashlib; c = sqlite3.connect('{db}'); "
        "c.execute('INSERT INTO ui_login_codes VALUES (?, 0, 9e9)', "
        f"(hashlib.sha256(b'{FORGED}').hexdigest(),)); c.commit(); print('planted')\""
    )
    llm.script(
        tool_calls([("exec", {"command": read}), ("exec", {"command": plant})]),
        text("tried"),
    )
    async with ui_daemon(tmp_path, llm, cfg=cfg) as ui:
        code = mint_code(cfg)  # the owner's pending code, as its hash in the state database
        tg.inject_message(OWNER, "look around", from_id=OWNER)
        await tg.wait_for_sent(1, timeout=30)
        async with ui.client() as c:
            forged = await c.login(FORGED)
            assert (await c.login(code)).status == 200  # twin: the owner's code still works
    seen = _results(llm.requests[1])
    assert seen.count("[exit code") == 2, seen  # both commands ran
    leaked = hashlib.sha256(code.encode()).hexdigest() in seen
    if sandboxed:
        assert not leaked and forged.status == 401, seen
    else:  # without the sandbox the same commands reach the database
        assert leaked and forged.status == 200, seen
