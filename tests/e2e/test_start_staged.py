"""`chela run` polls before its core is built (issue 28 item 3): ``chela run`` as a subprocess
against the fake Telegram and the fake LLM.

The core's build is held with a plugin whose import waits for a file (``load_plugins`` is part
of the core's build), so what the tests see does not depend on timing:

* the first getUpdates reaches the fake while the core cannot exist yet, and the heavy modules
  of the core are still not imported when the plugin is let go; the message the poll handed
  out waits at the gate, unconfirmed, and is answered exactly once when the core is up;
* SIGTERM while the core's modules load: exit 0, the waiting message stays with the platform
  (its update is not confirmed) and is answered exactly once after the next start;
* a start error after the channels polled (the HTTP channel's port taken) still ends the
  command with its one line and exit status 1.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

from tests.e2e import TG_TOKEN, config_file, telegram_section
from tests.fakes.llm import text

ROOT = Path(__file__).resolve().parents[2]
OWNER = 42
WAITS = "a message waits for the core to be built"
# modules only the core imports (the telegram channel's start imports the agent's turn types
# for its command menu, so those are not on the list)
HEAVY = ("bot.app.core", "bot.conversation.pipeline", "bot.schedule", "bot.ui.context")

PLUGIN = f'''"""Holds the core's build: its import waits for the file "go"."""
import os
import sys
import time
from pathlib import Path

_dir = Path(os.environ["START_HOLD_DIR"])
(_dir / "importing").write_text("")
while not (_dir / "go").exists():
    time.sleep(0.01)
_heavy = [m for m in {HEAVY!r} if m in sys.modules]
(_dir / "heavy at release").write_text(" ".join(_heavy))
'''


def write_config(tmp_path: Path, llm, tg, *, http_port: int | None = None) -> Path:
    channels = telegram_section(tg)
    if http_port is not None:
        channels["http"] = {"enabled": True, "listen": f"127.0.0.1:{http_port}"}
    cfg = config_file(
        tmp_path / "config.toml",
        llm,
        workspace=tmp_path / "ws",
        state_dir=tmp_path / "state",
        channels=channels,
    )
    (tmp_path / "plugins").mkdir()
    (tmp_path / "plugins" / "start_hold.py").write_text(PLUGIN)
    cfg.write_text(cfg.read_text() + '[[plugins]]\nmodule = "start_hold"\n')
    return cfg


def chela_run(cfg: Path, tmp_path: Path) -> subprocess.Popen:
    env = {
        **os.environ,
        "TEST_TG_TOKEN": TG_TOKEN,
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(tmp_path / "plugins")]),
        "START_HOLD_DIR": str(tmp_path),
    }
    env.pop("CHELA_MODEL_PATH", None)
    with open(tmp_path / "daemon.log", "ab") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "bot", "run", "--config", str(cfg)],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )


def log_text(tmp_path: Path) -> str:
    return (tmp_path / "daemon.log").read_text(errors="replace")


async def wait_log(tmp_path: Path, needle: str, proc: subprocess.Popen) -> None:
    for _ in range(600):
        if needle in log_text(tmp_path):
            return
        assert proc.poll() is None, log_text(tmp_path)
        await asyncio.sleep(0.1)
    raise AssertionError(f"no {needle!r} in the log:\n{log_text(tmp_path)}")


async def stop_async(proc: subprocess.Popen) -> int:
    """SIGTERM, then wait for the exit without blocking the loop the fakes answer on (a
    channel stopping confirms its offset to the fake)."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        for _ in range(300):
            if proc.poll() is not None:
                break
            await asyncio.sleep(0.1)
        else:
            proc.kill()
    return proc.wait(5)


def release(tmp_path: Path) -> None:
    (tmp_path / "go").write_text("")


def replies(tg) -> list[str]:
    return [s.visible_text for s in tg.sent if s.chat_id == OWNER]


async def test_the_first_poll_comes_before_the_core_and_its_message_is_answered_once(
    tmp_path, llm, tg
):
    cfg = write_config(tmp_path, llm, tg)
    llm.script(text("hello after the start"))
    uid = tg.inject_message(OWNER, "hi", from_id=OWNER)  # the first getUpdates hands it out
    proc = chela_run(cfg, tmp_path)
    try:
        # the plugin holds the core's build: this poll can only come from the first stage
        await tg.wait_for_call("getUpdates", 1, timeout=60)
        await wait_log(tmp_path, WAITS, proc)
        assert replies(tg) == []
        assert (tg.confirmed_offset or 0) <= uid  # not taken from the platform yet
        release(tmp_path)
        await tg.wait_for_sent(1, timeout=60)
        await wait_log(tmp_path, "ready in", proc)
        await tg.wait_for_offset(uid + 1, timeout=60)
        await asyncio.sleep(1.0)  # a second answer would show now
    finally:
        release(tmp_path)
        rc = await stop_async(proc)
    assert (tmp_path / "heavy at release").read_text() == ""  # none of HEAVY before the poll
    assert replies(tg) == ["hello after the start"]
    assert rc == 0, log_text(tmp_path)


async def test_sigterm_while_the_core_loads_exits_0_and_the_waiting_message_is_kept(
    tmp_path, llm, tg
):
    cfg = write_config(tmp_path, llm, tg)
    llm.script(text("answered after the restart"))
    uid = tg.inject_message(OWNER, "are you there?", from_id=OWNER)
    proc = chela_run(cfg, tmp_path)
    try:
        await wait_log(tmp_path, WAITS, proc)  # polled, handed to the gate, core held
        rc = await stop_async(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
    out = log_text(tmp_path)
    assert rc == 0, out
    assert "not taken from the platform" in out, out
    assert "Traceback" not in out and "sink failed" not in out, out
    assert replies(tg) == []
    assert (tg.confirmed_offset or 0) <= uid  # the platform still holds the message
    assert [u["update_id"] for u in tg.pending_updates] == [uid]

    release(tmp_path)  # the next start builds its core at once
    proc = chela_run(cfg, tmp_path)
    try:
        await tg.wait_for_sent(1, timeout=60)
        await tg.wait_for_offset(uid + 1, timeout=60)
        await asyncio.sleep(1.0)  # a second answer would show now
    finally:
        rc = await stop_async(proc)
    assert replies(tg) == ["answered after the restart"]
    assert len(llm.requests) == 1
    assert rc == 0, log_text(tmp_path)


async def test_a_start_error_after_the_first_poll_is_one_line_and_exit_1(tmp_path, llm, tg):
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        cfg = write_config(tmp_path, llm, tg, http_port=port)
        release(tmp_path)
        proc = chela_run(cfg, tmp_path)
        try:
            for _ in range(600):  # the fakes run on this loop: never block it
                if proc.poll() is not None:
                    break
                await asyncio.sleep(0.1)
        finally:
            if proc.poll() is None:
                proc.kill()
            rc = proc.wait(5)
    out = log_text(tmp_path)
    assert rc == 1, out
    errors = [line for line in out.splitlines() if line.startswith("chela: ")]
    assert len(errors) == 1 and f"port {port}" in errors[0], out
    assert "Traceback" not in out, out
    assert not re.search(r"ready in \d+ ms", out), out
    assert tg.calls_of("getUpdates"), out  # it failed after the first stage had polled
