"""The Chat page renders the Markdown subset with headings (``## Heading`` becomes a heading,
lists, tables, code and links as before), and stays usable on a 390 px wide phone: Send is
on screen without scrolling and the session select does not overflow."""

from __future__ import annotations

from tests.e2e.browser.kit import SESSION_LOOP, expect, login
from tests.e2e.ui_client import mint_code, ui_daemon
from tests.fakes.llm import text

pytestmark = SESSION_LOOP

REPLY = (
    "## Plan for today\n"
    "Some words.\n"
    "### Steps\n"
    "- wake up\n"
    "- **stretch**\n\n"
    "| a | b |\n|---|---|\n| 1 | 2 |\n\n"
    "```\ncode here\n```\n"
    "See https://example.com/docs and #not-a-heading and C# here.\n"
)


async def test_headings_lists_tables_code_and_links_render(tmp_path, llm, page):
    llm.script(text(REPLY))
    async with ui_daemon(tmp_path, llm) as ui:
        await login(page, ui.base, mint_code(ui.cfg))
        await page.get_by_role("textbox", name="Message").fill("plan my day")
        await page.get_by_role("button", name="Send").click()
        reply = page.get_by_role("log", name="Conversation").get_by_role(
            "article", name="Assistant message"
        )
        await expect(reply.get_by_role("heading", name="Plan for today")).to_be_visible()
        await expect(reply.get_by_role("heading", name="Steps")).to_be_visible()
        assert "##" not in await reply.inner_text()
        # the page keeps its own level-1 heading; a message's headings are below it
        await expect(page.get_by_role("heading", level=1)).to_have_count(1)
        await expect(reply.get_by_role("listitem")).to_have_count(2)
        await expect(reply.get_by_role("table")).to_contain_text("2")
        await expect(reply.locator("pre code")).to_have_text("code here")
        link = reply.get_by_role("link", name="https://example.com/docs")
        await expect(link).to_have_attribute("rel", "noopener noreferrer")
        await expect(reply).to_contain_text("#not-a-heading and C# here.")


async def test_chat_is_usable_390_px_wide(tmp_path, llm, browser):
    context = await browser.new_context(viewport={"width": 390, "height": 844})
    try:
        page = await context.new_page()
        long_session = "agent:main:telegram:direct:123456789012345678901234567890"
        async with ui_daemon(tmp_path, llm) as ui:
            ui.daemon.store.commit_turn(
                long_session, "t1", [{"role": "user", "content": "hello from a long key"}]
            )
            await login(page, ui.base, mint_code(ui.cfg))
            send = page.get_by_role("button", name="Send")
            await expect(send).to_be_visible()
            box = await send.bounding_box()
            assert box is not None
            assert box["x"] >= 0 and box["x"] + box["width"] <= 390, box
            assert box["y"] >= 0 and box["y"] + box["height"] <= 844, box  # no scrolling needed
            select = page.get_by_role("combobox", name="Session")
            await expect(select.get_by_role("option")).not_to_have_count(0)
            sbox = await select.bounding_box()
            assert sbox is not None and sbox["x"] + sbox["width"] <= 390, sbox
            width = await page.evaluate("() => document.documentElement.scrollWidth")
            assert width <= 390
            # the twin at desktop width: the same controls, also on screen
            await page.set_viewport_size({"width": 1280, "height": 800})
            box = await send.bounding_box()
            assert box is not None and box["y"] + box["height"] <= 800
    finally:
        await context.close()
