"""``chela doctor``'s browser line (bot/agent/tools/browser/probe.py) on the real Chromium: it
starts, a loopback page is refused by the proxy, no network needed; a missing executable is
said plainly."""

from __future__ import annotations

import pytest

from bot.agent.tools.browser.probe import probe
from bot.config.browser import BrowserConfig
from tests.e2e.browser_site import CHROMIUM, skip_reason

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.skipif(bool(skip_reason()), reason=skip_reason() or "ok"),
]


async def test_the_probe_starts_chromium_and_sees_the_rule_refuse_loopback():
    ok, line = await probe(BrowserConfig(executable=CHROMIUM))
    assert ok, line
    assert "the proxy refused a loopback page" in line and CHROMIUM in line


async def test_a_missing_chromium_is_said_plainly(tmp_path):
    ok, line = await probe(BrowserConfig(executable=str(tmp_path / "no-chromium")))
    assert not ok and line.startswith("no Chromium found")
