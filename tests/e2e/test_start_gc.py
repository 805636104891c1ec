"""`chela run` starts with the cyclic garbage collector off and, once ready, switches it on
with start-up's objects frozen out of its view (bot/app/heap.py): the imports do not pay for
collections, and a full collection while messages flow does not walk the ~80,000 objects
that live as long as the daemon.

A real `chela run` (no channels, so nothing but the daemon) is watched from inside by a
wrapper that only observes: a ``gc.callbacks`` hook counts the collections that start before
"ready", and a hook on ``Daemon.stop`` (installed when bot.app.daemon is first imported, so
the import order is the daemon's own) writes the collector's state when the stop begins."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

WATCH = """
import gc, importlib.machinery, json, os, sys

seen = {"collections_before_ready": 0, "ready": False}

def counted(phase, info):
    if phase == "start" and not seen["ready"]:
        seen["collections_before_ready"] += 1

gc.callbacks.append(counted)

def patch(module):
    Daemon = module.Daemon
    start, stop = Daemon.start, Daemon.stop

    async def started(self):
        await start(self)
        seen["ready"] = True

    async def stopping(self):
        state = {**seen, "enabled": gc.isenabled(), "frozen": gc.get_freeze_count()}
        with open(os.environ["GC_STATE"], "w") as f:
            json.dump(state, f)
        await stop(self)

    Daemon.start, Daemon.stop = started, stopping

class AfterDaemon:
    def find_spec(self, name, path=None, target=None):
        if name != "bot.app.daemon":
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            patch(module)

        spec.loader.exec_module = exec_module
        return spec

sys.meta_path.insert(0, AfterDaemon())
sys.argv = ["chela", *sys.argv[1:]]
from bot.__main__ import entry
seen["collections_before_ready"] = 0  # from here on it is chela's start
entry()
"""

AT_CONFIG = """
import gc, sys

class At:
    def find_spec(self, name, path=None, target=None):
        if name == "bot.config":
            sys.meta_path.remove(self)
            print("collector on at config:", gc.isenabled(), flush=True)
        return None

sys.meta_path.insert(0, At())
sys.argv = ["chela", *sys.argv[1:]]
from bot.__main__ import entry
entry()
"""


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "PYTHONPATH": str(ROOT),
        "OPENAI_API_KEY": "sk-test",
        **extra,
    }


def _config(tmp_path: Path) -> Path:
    cfg = tmp_path / "chela.toml"
    cfg.write_text(
        f'[agent]\nmodel = "openai/gpt-4o-mini"\nstate_dir = "{tmp_path / "state"}"\n'
        f'workspace = "{tmp_path / "ws"}"\n'
    )
    return cfg


def test_chela_run_collects_nothing_before_ready_then_collects_with_startup_frozen(tmp_path):
    state = tmp_path / "gc.json"
    proc = subprocess.Popen(
        [sys.executable, "-c", WATCH, "run", "--config", str(_config(tmp_path))],
        cwd=tmp_path,
        env=_env(tmp_path, GC_STATE=str(state)),
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        lines = []
        for line in proc.stderr:
            lines.append(line)
            if "ready in" in line:
                break
        else:
            raise AssertionError("no 'ready' line:\n" + "".join(lines))
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    seen = json.loads(state.read_text())
    assert seen["ready"] is True
    assert seen["collections_before_ready"] == 0
    assert seen["enabled"] is True
    # what start-up imported (the config's models, the core) is frozen, not collected again
    assert seen["frozen"] > 10_000


def _collector_at_config(tmp_path: Path, *args: str) -> str:
    out = subprocess.run(
        [sys.executable, "-c", AT_CONFIG, *args],
        cwd=tmp_path,
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    return out.stdout + out.stderr


def test_other_commands_keep_the_collector_on(tmp_path):
    out = _collector_at_config(tmp_path, "check", "--config", str(_config(tmp_path)))
    assert "collector on at config: True" in out, out


def test_chela_run_imports_its_config_with_the_collector_off(tmp_path):
    out = _collector_at_config(tmp_path, "run", "--config", str(tmp_path / "none.toml"))
    assert "collector on at config: False" in out, out
