"""`chela run` takes SIGTERM as a stop from its first moment (exit 0, no traceback), also
while its first imports run, before the daemon's event loop installs its own handlers.

The signal is sent by the process to itself when the import of a module begins (a meta-path
finder that only watches): ``bot.config`` (the first imports) or ``bot.app.core`` (the daemon's
components, after the config is read and before the loop runs), so the test does not depend on
timing.  The twin:
another subcommand keeps the default action, and a normal start and stop exits 0."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

KILL_AT_IMPORT = """
import os, signal, sys

class KillAt:
    def find_spec(self, name, path=None, target=None):
        if name == os.environ["KILL_AT"]:
            sys.meta_path.remove(self)
            os.kill(os.getpid(), signal.SIGTERM)
        return None

sys.meta_path.insert(0, KillAt())
sys.argv = ["chela", *sys.argv[1:]]
from bot.__main__ import entry
entry()
"""


def chela_killed_at_import(
    tmp_path: Path, *args: str, at: str = "bot.config"
) -> subprocess.CompletedProcess:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONPATH": str(ROOT), "KILL_AT": at}
    return subprocess.run(
        [sys.executable, "-c", KILL_AT_IMPORT, *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_sigterm_during_the_first_imports_of_chela_run_exits_0(tmp_path):
    out = chela_killed_at_import(tmp_path, "run", "--config", str(tmp_path / "none.toml"))
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr


def test_sigterm_while_the_daemon_imports_its_components_exits_0(tmp_path):
    cfg = tmp_path / "config.toml"
    cfg.write_text(
        f'[agent]\nworkspace = "{tmp_path / "ws"}"\nstate_dir = "{tmp_path / "state"}"\n'
        'model = "openai/gpt-4o-mini"\n'
    )
    out = chela_killed_at_import(tmp_path, "run", "--config", str(cfg), at="bot.app.core")
    assert out.returncode == 0, out.stderr
    assert "config file:" not in out.stderr  # stopped before the daemon said anything
    assert "Traceback" not in out.stderr


def test_other_commands_keep_the_default_action(tmp_path):
    out = chela_killed_at_import(tmp_path, "check", "--config", str(tmp_path / "none.toml"))
    assert out.returncode == -signal.SIGTERM


def test_the_module_is_light():
    """Nothing heavy is imported before the handler is installed."""
    code = "import sys, bot.__main__; print(sorted(m for m in sys.modules if m.startswith('bot')))"
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "['bot', 'bot.__main__']"
