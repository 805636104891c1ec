"""What the browser tool's Chromium leaves behind and carries: nothing outlives a daemon killed
with SIGKILL (alone or with its whole process group), a Chromium left on the profile is ended
before a new one starts on it, and Chromium gets none of the daemon's secrets from its
environment and keeps its crash reports in the profile, not in the owner's ~/.config."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bot.config.browser import BrowserConfig
from tests.e2e.browser_site import CHROMIUM, skip_reason

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.skipif(bool(skip_reason()), reason=skip_reason() or "ok"),
]


def chromium_pids(profile: Path) -> list[int]:
    """Chromium and its helpers on this profile (helpers' command lines are rewritten into
    one space-separated string, so the flag is looked for anywhere in it)."""
    needle = f"--user-data-dir={profile}".encode()
    out = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            with contextlib.suppress(OSError):
                if needle in Path(f"/proc/{entry.name}/cmdline").read_bytes():
                    out.append(int(entry.name))
    return out


def gone(profile: Path, seconds: float = 5) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if not chromium_pids(profile):
            return True
        time.sleep(0.1)
    return False


@pytest.mark.parametrize("kill", ["os.kill(os.getpid(), 9)", "os.killpg(0, 9)"])
def test_no_chromium_outlives_a_daemon_killed_with_sigkill(tmp_path, kill):
    script = (
        "import asyncio, os\n"
        "from pathlib import Path\n"
        "from bot.agent.tools.browser import Browsers\n"
        "from bot.config.browser import BrowserConfig\n"
        "async def main():\n"
        f"    b = Browsers(BrowserConfig(executable={CHROMIUM!r}), [], Path({str(tmp_path)!r}))\n"
        "    page = await (await b.get('killed')).new_page()\n"
        "    await page.goto('about:blank')\n"
        "    print('started', flush=True)\n"
        f"    {kill}\n"
        "asyncio.run(main())\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        start_new_session=True,  # its own group, for the group kill
    )
    assert "started" in out.stdout and out.returncode == -9, out.stderr
    assert gone(tmp_path / "browser" / "profile-killed")


async def test_a_chromium_left_on_the_profile_is_ended_before_a_new_one(tmp_path):
    from bot.agent.tools.browser import Browsers

    profile = tmp_path / "browser" / "profile-main"
    profile.mkdir(parents=True, mode=0o700)
    left = subprocess.Popen(
        [CHROMIUM, "--headless", f"--user-data-dir={profile}", "about:blank"]
        + (["--no-sandbox"] if os.geteuid() == 0 else []),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        for _ in range(100):
            if (profile / "SingletonLock").is_symlink():
                break
            await asyncio.sleep(0.1)
        assert (profile / "SingletonLock").is_symlink()
        browsers = Browsers(BrowserConfig(executable=CHROMIUM), [], tmp_path)
        try:
            b = await browsers.get("main")
            page = await b.new_page()
            await page.goto("about:blank")
            assert left.wait(10) is not None  # the leftover was ended
        finally:
            await browsers.aclose()
    finally:
        with contextlib.suppress(OSError):
            os.killpg(left.pid, 9)
        left.wait(10)


async def test_chromium_gets_no_secret_from_the_environment(tmp_path, monkeypatch):
    from bot.agent.tools.browser import Browsers
    from bot.agent.tools.browser.launch import browser_pid

    monkeypatch.setenv("CHELA_TEST_API_KEY", "sk-must-not-reach-chromium")
    browsers = Browsers(BrowserConfig(executable=CHROMIUM), [], tmp_path)
    try:
        b = await browsers.get("main")
        pid = browser_pid(b.profile)
        assert pid is not None
        env = dict(
            item.split(b"=", 1)
            for item in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            if b"=" in item
        )
        assert b"CHELA_TEST_API_KEY" not in env
        assert env[b"PATH"] == os.environ["PATH"].encode()  # twin: what it needs is there
        assert env[b"XDG_CONFIG_HOME"] == str(b.profile).encode()
        assert (b.profile / "chromium").is_dir()  # its crash reports' home, in the profile
    finally:
        await browsers.aclose()
