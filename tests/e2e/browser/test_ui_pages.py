"""Every page of the Control UI in Chromium against the real daemon and its fakes (SPEC
§16.6): the tables, regions and logs by their names, and each page's main action."""

from __future__ import annotations

import logging
import os

from tests.e2e import TG_TOKEN, telegram_section
from tests.e2e.browser.kit import SESSION_LOOP, csrf, expect, login, open_page
from tests.e2e.ui_client import mint_code, ui_daemon
from tests.fakes.llm import text, usage

pytestmark = SESSION_LOOP


def table(page, name: str):
    return page.get_by_role("table", name=name)


async def chat(page, words: str, answer: str) -> None:
    await page.get_by_role("textbox", name="Message").fill(words)
    await page.get_by_role("textbox", name="Message").press("Enter")  # Enter sends
    log = page.get_by_role("log", name="Conversation")
    await expect(log.get_by_role("article", name="Assistant message").last).to_contain_text(answer)


async def test_sessions_usage_and_workspace(tmp_path, llm, page):
    llm.script(text("pelicans fly low", usage=usage(120, 30)))
    async with ui_daemon(tmp_path, llm) as ui:
        await login(page, ui.base, mint_code(ui.cfg))
        await chat(page, "tell me about pelicans", "pelicans fly low")
        main = ui.cfg.agent.id
        # Sessions: the table, search by message text, the transcript
        await open_page(page, "Sessions")
        sessions = table(page, "Sessions")
        await expect(sessions.get_by_role("link", name=f"agent:{main}:main")).to_be_visible()
        search = page.get_by_role("searchbox", name="Search sessions")
        await search.fill("albatross")
        await expect(sessions).to_contain_text("No session matches")
        await search.fill("pelicans")
        await sessions.get_by_role("link", name=f"agent:{main}:main").click()
        transcript = page.get_by_role("log", name="Transcript")
        await expect(transcript.get_by_role("article", name="Your message")).to_contain_text(
            "tell me about pelicans"
        )
        await expect(transcript.get_by_role("article", name="Assistant message")).to_contain_text(
            "pelicans fly low"
        )
        # Usage: totals and the groupings, for the period chosen
        await open_page(page, "Usage")
        await page.get_by_role("combobox", name="Period").select_option(label="7 days")
        await expect(table(page, "Totals")).to_contain_text("120")
        await expect(table(page, "Usage by model")).to_contain_text("fake-model")
        for name in ("Usage by day", "Usage by session", "Usage by source"):
            await expect(table(page, name)).to_be_visible()
        # Workspace: one button per prompt file shows it; the /context report
        await open_page(page, "Workspace")
        await page.get_by_role("button", name="AGENTS.md").click()
        agents = (ui.cfg.agent.workspace / "AGENTS.md").read_text().splitlines()[0]
        await expect(page.get_by_role("region", name="AGENTS.md")).to_contain_text(agents)
        await expect(page.get_by_role("region", name="Context report")).to_contain_text("SOUL.md")


async def test_channels_schedule_config_and_logs(tmp_path, llm, tg, page):
    cfg = {"channels": telegram_section(tg), "heartbeat": {"every": "1h"}}
    async with ui_daemon(tmp_path, llm, **cfg) as ui:
        await login(page, ui.base, mint_code(ui.cfg))
        await open_page(page, "Channels")
        telegram = table(page, "Channels").get_by_role("row").filter(has_text="telegram")
        await expect(telegram.get_by_role("cell").nth(1)).to_have_text("connected")
        await expect(table(page, "MCP servers")).to_be_visible()
        # Schedule: the heartbeat's row with its buttons
        await open_page(page, "Schedule")
        heartbeat = table(page, "Jobs").get_by_role("row").filter(has_text="heartbeat")
        await expect(heartbeat).to_contain_text("every 1h")
        await expect(heartbeat.get_by_role("button", name="Run now")).to_be_enabled()
        await expect(heartbeat.get_by_role("button", name="Pause")).to_be_enabled()
        # Config: the effective config; a secret only as its variable's name, set
        await open_page(page, "Config")
        await page.get_by_text("Effective config").click()  # folded under the editor
        effective = page.get_by_role("region", name="Effective config")
        await expect(effective).to_contain_text("env TEST_TG_TOKEN (set)")
        assert TG_TOKEN not in await page.content()
        # Logs: the recent lines, new ones followed live, scrubbed, filtered by level
        logging.getLogger("chela.test").warning("before the page: a canary line")
        await open_page(page, "Logs")
        logs = page.get_by_role("log", name="Logs")
        await expect(logs).to_contain_text("before the page: a canary line")
        await expect(page.get_by_role("checkbox", name="Follow")).to_be_checked()
        logging.getLogger("chela.test").warning("followed: token %s", TG_TOKEN)
        await expect(logs).to_contain_text("followed: token")
        assert TG_TOKEN not in await logs.inner_text()
        await page.get_by_role("combobox", name="Level").select_option(label="ERROR")
        await expect(logs).not_to_contain_text("canary line")


async def test_system_revokes_a_browser_session_and_logs_out(tmp_path, llm, page, browser):
    async with ui_daemon(tmp_path, llm) as ui:
        await login(page, ui.base, mint_code(ui.cfg))
        other = await browser.new_context()
        try:
            tablet = await other.new_page()
            await login(tablet, ui.base, mint_code(ui.cfg))
            await open_page(page, "System")
            await expect(page.get_by_text(str(os.getpid()))).to_be_visible()
            rows = table(page, "Browser sessions").get_by_role("row")
            await expect(rows).to_have_count(3)  # the header and two sessions
            revoke = page.get_by_role("button", name="Revoke")
            tablet_row = rows.filter(has=revoke).filter(has_not_text="this browser")
            await tablet_row.get_by_role("button", name="Revoke").click()
            await expect(rows).to_have_count(2)
            await tablet.reload()  # the revoked browser is asked to log in again
            await expect(tablet.get_by_role("heading", name="Log in")).to_be_visible()
            # Log out: this browser's session ends and its token is gone
            await page.get_by_role("button", name="Log out").click()
            await expect(page.get_by_role("heading", name="Log in")).to_be_visible()
            assert not await csrf(page)
            await page.reload()
            await expect(page.get_by_role("heading", name="Log in")).to_be_visible()
        finally:
            await other.close()


async def test_a_read_only_ui_shows_and_offers_no_write(tmp_path, llm, tg, page):
    llm.script(text("seen on the wall"))
    sections = {"channels": telegram_section(tg), "ui": {"read_only": True}}
    async with ui_daemon(tmp_path, llm, heartbeat={"every": "1h"}, **sections) as ui:
        await login(page, ui.base, mint_code(ui.cfg))  # login is not a write it refuses
        tg.inject_message(42, "from the phone", from_id=42)
        log = page.get_by_role("log", name="Conversation")
        await expect(log.get_by_role("article", name="Assistant message")).to_contain_text(
            "seen on the wall"
        )
        await expect(page.get_by_role("textbox", name="Message")).to_be_disabled()
        await expect(page.get_by_role("button", name="Send")).to_be_disabled()
        await expect(page.get_by_role("button", name="Attach file")).to_be_disabled()
        await open_page(page, "Schedule")
        await expect(page.get_by_role("button", name="Run now")).to_be_disabled()
        await open_page(page, "System")
        await expect(page.get_by_role("button", name="Revoke")).to_be_disabled()
        await page.get_by_role("button", name="Log out").click()  # logout is allowed
        await expect(page.get_by_role("heading", name="Log in")).to_be_visible()
