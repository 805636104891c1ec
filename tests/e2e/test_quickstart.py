"""The README's quick start works on a stock Debian/Ubuntu Python (issue 37 #5): its two
commands create a virtual environment and install and run only through it, and the test
command is the one CI runs.  Running the first command on a Python that refuses
system-wide installs takes one to two minutes of installing, so ``.ci/run`` does that as a
gate of its own (``tests/e2e/quickstart.py``); this file holds the README to its shape."""

from __future__ import annotations

import re
import shlex

from tests.e2e.quickstart import ROOT, quick_start_command

README = (ROOT / "README.md").read_text()
CI = (ROOT / ".ci" / "run").read_text()


def sh_blocks() -> list[str]:
    section = README.split("\n## Quick start", 1)[1].split("\n## ", 1)[0]
    return [b.strip() for b in re.findall(r"```sh\n(.*?)```", section, re.S)]


def steps(command: str) -> list[list[str]]:
    return [shlex.split(part) for part in command.split("&&")]


def test_both_commands_make_and_use_a_virtual_environment():
    run, tests = sh_blocks()[:2]
    assert quick_start_command(README) == run
    for command in (run, tests):
        first, *rest = steps(command)
        assert first == ["python3", "-m", "venv", ".venv"], command
        assert rest, command
        for argv in rest:  # nothing installs or runs outside the environment
            assert argv[0].startswith(".venv/bin/"), command
    assert steps(run)[1] == [".venv/bin/pip", "install", "-e", "."]
    assert steps(run)[-1][0] == ".venv/bin/chela"


def test_the_readme_test_command_is_the_one_ci_runs():
    tests = sh_blocks()[1]
    pytest_step = steps(tests)[-1]
    assert pytest_step[:3] == [".venv/bin/python", "-m", "pytest"]
    ci_lines = [shlex.split(ln) for ln in CI.splitlines() if " -m pytest " in ln]
    assert len(ci_lines) == 1, ci_lines
    # CI adds coverage to the same command
    assert [a for a in ci_lines[0] if not a.startswith("--cov")] == pytest_step
    assert "python3 -m venv .venv" in CI


def test_ci_runs_the_quick_start_on_a_refusing_python():
    gates = [ln for ln in CI.splitlines() if ln.startswith("gate ") and "quickstart.py" in ln]
    assert len(gates) == 1, "the quick start gate is missing from .ci/run"
