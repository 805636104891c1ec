"""The README's quick start on a Python that refuses system-wide installs (PEP 668), as a stock
Debian or Ubuntu Python does: a CI gate (``.ci/run``), not a pytest test, because installing
the project into a fresh virtual environment takes one to two minutes.

    python3 tests/e2e/quickstart.py [--python PATH]

1. A refusing Python: ``--python``, else this interpreter's base install when it has its
   ``EXTERNALLY-MANAGED`` marker (Debian's own), else a twin of that install whose standard
   library is linked file by file into a temporary prefix with the marker added (its own pip
   installed first).  The twin must refuse ``python3 -m pip install -e .``, or nothing is
   proven.
2. A copy of this checkout (without .git, .venv, caches), a fresh HOME, and PATH starting with
   that Python's ``python3``.
3. The README's first command, taken from the first ``sh`` block under "## Quick start", run by
   ``bash -c``; it passes once ``chela run`` logs that it is ready (then it is stopped with
   SIGTERM and must exit 0).

Exit 0 when the command got the daemon ready; 1 with the output's tail otherwise."""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MARKER = "EXTERNALLY-MANAGED"
READY = "ready in"
LIMIT = 900.0  # seconds for the install and the start together
SKIP = shutil.ignore_patterns(
    ".git", ".venv", "__pycache__", "*.egg-info", ".mypy_cache", ".pytest_cache", "mutants"
)


def quick_start_command(readme: str) -> str:
    """The first command of the README's quick start: its first ``sh`` block."""
    section = readme.split("\n## Quick start", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    if block is None:
        raise SystemExit("README.md: no ```sh block under ## Quick start")
    lines = [ln for ln in block.group(1).splitlines() if ln.strip()]
    return lines[0]


def base_python() -> Path:
    """This interpreter's base install (outside any virtual environment)."""
    return Path(getattr(sys, "_base_executable", sys.executable)).resolve()


def marked(python: Path) -> bool:
    out = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('stdlib'))"],
        capture_output=True,
        text=True,
        check=True,
    )
    return (Path(out.stdout.strip()) / MARKER).is_file()


def twin(base: Path, where: Path) -> Path:
    """A Python whose standard library is ``base``'s, linked into ``where`` with the PEP 668
    marker, and with its own site-packages (pip only)."""
    stdlib = Path(sysconfig.get_path("stdlib", vars={"installed_base": sys.base_prefix}))
    lib = where / "lib" / stdlib.name
    lib.mkdir(parents=True)
    for entry in stdlib.iterdir():
        if entry.name not in ("site-packages", "dist-packages", MARKER):
            (lib / entry.name).symlink_to(entry)
    (lib / "site-packages").mkdir()
    (where / "bin").mkdir()
    python = where / "bin" / "python3"
    shutil.copy2(base, python)
    subprocess.run([str(python), "-m", "ensurepip", "--default-pip"], check=True, env=clean_env())
    (lib / MARKER).write_text(
        "[externally-managed]\nError=This Python is managed by the system (a test of PEP 668).\n"
    )
    return python


def clean_env(**extra: str) -> dict[str, str]:
    keep = {
        k: v
        for k, v in os.environ.items()
        if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "PIP_BREAK_SYSTEM_PACKAGES")
    }
    return {**keep, **extra}


def refuses(python: Path, checkout: Path, env: dict[str, str]) -> bool:
    """The old quick start, ``python3 -m pip install -e .``, is refused by this Python."""
    r = subprocess.run(
        [str(python), "-m", "pip", "install", "-e", "."],
        cwd=checkout,
        env=env,
        capture_output=True,
        text=True,
    )
    said = r.stdout + r.stderr
    return r.returncode != 0 and ("externally-managed" in said or "No module named pip" in said)


def run_until_ready(command: str, cwd: Path, env: dict[str, str], log: Path) -> int:
    """Run ``command``; 0 once its output says the daemon is ready and it stopped cleanly."""
    with log.open("w") as out:
        proc = subprocess.Popen(
            ["bash", "-c", command],
            cwd=cwd,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # the command and the daemon it starts: one group
        )
    deadline = time.monotonic() + LIMIT
    while proc.poll() is None and time.monotonic() < deadline:
        if READY in log.read_text(errors="replace"):
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                return proc.wait(30)
            except subprocess.TimeoutExpired:
                break
        time.sleep(0.5)
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        return 124
    return proc.returncode or 1  # ended without ever being ready


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--python", type=Path, help="a Python that refuses system-wide installs")
    args = ap.parse_args(argv)
    command = quick_start_command((ROOT / "README.md").read_text())
    with tempfile.TemporaryDirectory(prefix="chela-quickstart-") as tmp:
        work = Path(tmp)
        checkout = work / "chela"
        shutil.copytree(ROOT, checkout, ignore=SKIP, symlinks=True)
        home = work / "home"
        home.mkdir()
        python = args.python or base_python()
        if args.python is None and not marked(python):
            python = twin(python, work / "python")
        bindir = work / "bin"  # `python3` first on PATH, whatever the Python's file is named
        bindir.mkdir()
        (bindir / "python3").symlink_to(python)
        env = clean_env(HOME=str(home), PATH=f"{bindir}:{os.environ.get('PATH', '')}")
        if not refuses(python, checkout, env):
            print(f"quickstart: {python} installs system-wide; it proves nothing", file=sys.stderr)
            return 1
        print(f"quickstart: {python} refuses `python3 -m pip install -e .` (PEP 668)")
        print(f"quickstart: running the README's first command: {command}", flush=True)
        log = work / "quickstart.log"
        started = time.monotonic()
        rc = run_until_ready(command, checkout, env, log)
        text = log.read_text(errors="replace")
        took = time.monotonic() - started
        if rc == 0 and READY in text:
            print(f"quickstart: the daemon was ready and stopped cleanly ({took:.0f} s)")
            return 0
        print("\n".join(text.splitlines()[-40:]), file=sys.stderr)
        print(f"quickstart: FAILED (exit {rc}, {took:.0f} s)", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
