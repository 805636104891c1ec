"""``chela dashboard`` gives the browser a private file, never the login link (SPEC §16.2):
a command line is readable by every local user, the code in it would log them in.  The file
(0600, in a 0700 directory of the state dir) leads a real browser on to the link, fragment
and all, and is removed at a later run once its code has expired.  The attack (the code in
the browser's argv) is tests/e2e/test_ui_redteam.py::test_the_login_code_is_not_on_the_
browsers_command_line; a real browser opening the file is test_ui_dashboard_opener_browser.py."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import unquote, urlparse

from tests.e2e.harness import config_file


def run_dashboard(tmp_path: Path, llm, *extra: str) -> tuple[str, list[str]]:
    """Run ``chela dashboard`` with a browser (``$BROWSER``) that records its argv: the
    printed link and the browser's arguments."""
    rec = tmp_path / "browser-argv.txt"
    browser_sh = tmp_path / "browser.sh"
    browser_sh.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" >> "{rec}"\n')
    browser_sh.chmod(0o700)
    path = config_file(
        tmp_path / "c.toml",
        llm,
        workspace=tmp_path / "ws",
        state_dir=tmp_path / "state",
        channels={"http": {"enabled": True, "listen": "127.0.0.1:9911"}},
    )
    done = subprocess.run(
        [sys.executable, "-m", "bot", "dashboard", "--config", str(path), *extra],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "BROWSER": f"{browser_sh} %s"},
    )
    assert done.returncode == 0, done.stderr
    url = next(ln for ln in done.stdout.splitlines() if "#login=" in ln)
    argv = rec.read_text().splitlines() if rec.exists() else []
    rec.unlink(missing_ok=True)
    return url, argv


def test_the_browser_is_given_a_private_file_that_leads_to_the_link(tmp_path, llm):
    url, argv = run_dashboard(tmp_path, llm)
    code = url.rsplit("#login=", 1)[1]
    assert len(argv) == 1 and argv[0].startswith("file://") and code not in argv[0]
    opener = Path(unquote(urlparse(argv[0]).path))
    assert opener.parent == tmp_path / "state" / "dashboard"
    assert stat.S_IMODE(opener.stat().st_mode) == 0o600
    assert stat.S_IMODE(opener.parent.stat().st_mode) == 0o700
    assert f'location.replace("{url}")' in opener.read_text()


def test_expired_opener_files_are_removed_at_the_next_run_and_fresh_ones_kept(tmp_path, llm):
    _, first = run_dashboard(tmp_path, llm)
    _, second = run_dashboard(tmp_path, llm)
    old, fresh = (Path(unquote(urlparse(a[0]).path)) for a in (first, second))
    gone = time.time() - 10 * 60
    os.utime(old, (gone, gone))  # its code expired long ago
    _, third = run_dashboard(tmp_path, llm)
    assert not old.exists() and fresh.exists()
    assert Path(unquote(urlparse(third[0]).path)).exists()


def test_print_url_with_no_open_writes_no_file(tmp_path, llm):
    url, argv = run_dashboard(tmp_path, llm, "--print-url", "--no-open")
    assert "#login=" in url and argv == []
    assert not (tmp_path / "state" / "dashboard").exists()
