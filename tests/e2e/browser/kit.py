"""Helpers for the Control UI's browser tests (SPEC §16.6–16.7): Debian's Chromium driven by
Playwright, never a downloaded browser (``playwright install`` is not used anywhere).

A test logs in through the fragment the way ``chela dashboard`` links do, then finds every
control by ARIA role and accessible name (``page.get_by_role``)."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import pytest

# every browser test runs in the session's loop, where the one browser lives
SESSION_LOOP = pytest.mark.asyncio(loop_scope="session")
CHROMIUM = "/usr/bin/chromium"
# Chromium resolves this name to loopback (DNS rebinding: a hostile name that points at us)
EVIL_HOST = "evil.test"
CHROMIUM_ARGS = [f"--host-resolver-rules=MAP {EVIL_HOST} 127.0.0.1", "--no-proxy-server"]

try:
    from playwright.async_api import Page, async_playwright, expect
except ImportError:  # pragma: no cover - the conftest skips (fails under CI=true)
    async_playwright = None  # type: ignore[assignment]
    expect = None  # type: ignore[assignment]
    Page = Any  # type: ignore[assignment,misc]


def missing() -> str:
    """Why the browser tests cannot run here ("" when they can)."""
    if async_playwright is None:
        return "playwright is not installed (it is in the test extra: pip install -e '.[test]')"
    if not os.access(CHROMIUM, os.X_OK):
        return f"{CHROMIUM} is missing (apt-get install chromium)"
    return ""


async def login(page: Page, base: str, code: str) -> None:
    """Open ``chela dashboard``'s link and wait for the pages' navigation."""
    await page.goto(f"{base}/ui/#login={code}")
    await expect(page.get_by_role("navigation", name="Pages")).to_be_visible()


async def csrf(page: Page) -> str:
    return await page.evaluate("() => localStorage.getItem('chela_ui_csrf')")


async def open_page(page: Page, name: str) -> None:
    """Follow the navigation link and wait for the page's heading."""
    await page.get_by_role("navigation", name="Pages").get_by_role("link", name=name).click()
    await expect(page.get_by_role("heading", level=1, name=name)).to_be_visible()


async def wait_for(predicate, timeout: float = 10.0) -> Any:
    """Poll a plain (sync) predicate until it is truthy."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if loop.time() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.05)
