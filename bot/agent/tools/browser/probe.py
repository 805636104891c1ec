"""``chela doctor``'s look at the browser: Chromium found, its version, and one page load through
the proxy that must be refused (a loopback page), which needs no network."""

from __future__ import annotations

import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from bot.net import HostRules
from bot.net.proxy import GuardProxy

from .launch import (
    chromium_args,
    chromium_env,
    find_executable,
    kill_groups,
    running_as_root,
    sandbox_note,
)


def chromium_version(exe: str) -> str:
    try:
        out = subprocess.run(
            [exe, "--version"], check=False, capture_output=True, text=True, timeout=20
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"unknown ({e})"
    return out.stdout.strip() or "unknown"


async def probe(cfg: Any) -> tuple[bool, str]:
    """(ok, one line) for ``[tools.browser]`` ``cfg``."""
    exe = find_executable(cfg.executable)
    if exe is None:
        return (
            False,
            "no Chromium found (install Debian's chromium or set tools.browser.executable)",
        )
    try:
        from playwright.async_api import async_playwright
    except ImportError:
        return False, "playwright is not installed (pip install 'chela[browser]')"
    version = chromium_version(exe)
    as_root = running_as_root()
    with tempfile.TemporaryDirectory(prefix="chela-browser-probe-") as tmp:
        async with GuardProxy(HostRules()) as proxy, async_playwright() as pw:
            t0 = time.monotonic()
            try:
                ctx = await pw.chromium.launch_persistent_context(
                    tmp,
                    executable_path=exe,
                    headless=True,
                    args=chromium_args(proxy.port, 256, as_root=as_root),
                    env=chromium_env(Path(tmp)),
                    chromium_sandbox=True,
                )
                page = ctx.pages[0] if ctx.pages else await ctx.new_page()
                resp = await page.goto(f"http://127.0.0.1:{proxy.port}/probe", timeout=20_000)
                started = time.monotonic() - t0
                await ctx.close()
            except Exception as e:
                kill_groups(Path(tmp))
                return False, f"{version}: Chromium did not start: {str(e).splitlines()[0][:200]}"
    if resp is None or resp.status != 403 or not proxy.refusals:
        return False, f"{version}: a loopback page was NOT refused by the proxy"
    return True, (
        f"{version} at {exe}; started in {started:.1f}s; the proxy refused a loopback page; "
        f"{sandbox_note(as_root)}"
    )
