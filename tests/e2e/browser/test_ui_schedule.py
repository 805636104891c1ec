"""The Schedule page's actions in Chromium (SPEC §16.6): Run now runs the heartbeat once,
Pause and Resume."""

from __future__ import annotations

from tests.e2e.browser.kit import SESSION_LOOP, expect, login, open_page, wait_for
from tests.e2e.ui_client import mint_code, ui_daemon
from tests.fakes.llm import text

pytestmark = SESSION_LOOP


async def test_run_now_pause_and_resume(tmp_path, llm, page):
    llm.script(text("HEARTBEAT_OK"))
    (tmp_path / "ws").mkdir(parents=True)
    (tmp_path / "ws" / "HEARTBEAT.md").write_text("- look at the calendar\n")
    async with ui_daemon(tmp_path, llm, heartbeat={"every": "1h"}) as ui:
        await login(page, ui.base, mint_code(ui.cfg))
        await open_page(page, "Schedule")
        heartbeat = (
            page.get_by_role("table", name="Jobs").get_by_role("row").filter(has_text="heartbeat")
        )
        await heartbeat.get_by_role("button", name="Run now").click()
        await wait_for(lambda: len(llm.requests) == 1, timeout=15)
        await expect(heartbeat.get_by_role("cell").nth(6)).not_to_have_text("—")  # last result
        await heartbeat.get_by_role("button", name="Pause").click()
        await expect(heartbeat.get_by_role("button", name="Resume")).to_be_visible()
        await heartbeat.get_by_role("button", name="Resume").click()
        await expect(heartbeat.get_by_role("button", name="Pause")).to_be_visible()
