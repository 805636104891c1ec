# ruff: noqa: F811  (the browser fixtures are imported, then named as test arguments)
"""The file ``chela dashboard`` gives the browser in place of the login link leads Chromium on
to the link, fragment (the code) kept: it logs in, and the code is gone from the address."""

from __future__ import annotations

from bot.cli.dashboard import opener_file
from tests.e2e.browser import kit
from tests.e2e.browser.conftest import browser, llm, page  # noqa: F401 (fixtures)
from tests.e2e.browser.kit import csrf, expect
from tests.e2e.ui_client import mint_code, ui_daemon

pytestmark = kit.SESSION_LOOP


async def test_the_opener_file_logs_a_real_browser_in(tmp_path, llm, page):
    async with ui_daemon(tmp_path, llm) as ui:
        # the daemon listens on a free port (the config says 0): the link names the real one
        opener = opener_file(ui.cfg, f"{ui.base}/ui/#login={mint_code(ui.cfg)}")
        await page.goto(opener.as_uri())
        await expect(page.get_by_role("navigation", name="Pages")).to_be_visible()
        assert await csrf(page)
        assert "login=" not in page.url and page.url.startswith(f"{ui.base}/ui/")
