"""The Control UI's Chat in Chromium against the real daemon and the fake LLM (SPEC §16.2,
§16.5, §16.6): login through the fragment, streaming, exactly one reply after a reload in the
middle of a turn, Stop, and model-written HTML that must stay text."""

from __future__ import annotations

import asyncio
import json

from tests.e2e import telegram_section
from tests.e2e.browser.kit import SESSION_LOOP, csrf, expect, login
from tests.e2e.ui_client import mint_code, ui_daemon
from tests.fakes.llm import streamed, text, tool_calls

pytestmark = SESSION_LOOP
OWNER = 42  # telegram_section's allow_from


def conversation(page):
    return page.get_by_role("log", name="Conversation")


def assistant(page):
    return conversation(page).get_by_role("article", name="Assistant message")


def mine(page):
    return conversation(page).get_by_role("article", name="Your message")


async def send(page, words: str) -> None:
    await page.get_by_role("textbox", name="Message").fill(words)
    await page.get_by_role("button", name="Send").click()


async def test_login_through_the_fragment_and_a_used_link_is_refused(tmp_path, llm, page, browser):
    async with ui_daemon(tmp_path, llm) as ui:
        code = mint_code(ui.cfg)
        await login(page, ui.base, code)
        assert code not in page.url and "login" not in page.url  # out of the address bar
        token = await csrf(page)
        assert token and len(token) >= 43
        await expect(page.get_by_role("heading", level=1, name="Chat")).to_be_visible()
        # the same link again, in another browser profile: refused, the login page says why
        other = await browser.new_context()
        try:
            again = await other.new_page()
            await again.goto(f"{ui.base}/ui/#login={code}")
            await expect(again.get_by_role("heading", name="Log in")).to_be_visible()
            await expect(again.get_by_role("alert")).to_contain_text("used or has expired")
            assert code not in again.url
            assert not await csrf(again)
            # twin: a fresh code typed into the login page works
            await again.get_by_role("textbox", name="Login code").fill(mint_code(ui.cfg))
            await again.get_by_role("button", name="Log in").click()
            await expect(again.get_by_role("navigation", name="Pages")).to_be_visible()
        finally:
            await other.close()


async def test_a_reply_streams_and_shows_once_after_a_reload_mid_turn(tmp_path, llm, page):
    gate = asyncio.Event()
    llm.script(streamed("Half an ", "answer, then the rest.", gate=gate))
    try:
        async with ui_daemon(tmp_path, llm) as ui:
            await login(page, ui.base, mint_code(ui.cfg))
            await send(page, "tell me")
            await expect(assistant(page)).to_have_attribute("aria-busy", "true")
            await expect(assistant(page)).to_contain_text("Half an")  # the first delta, live
            pending = json.loads(await page.evaluate("localStorage.getItem('chela_ui_pending')"))
            assert pending["text"] == "tell me"
            await page.reload()  # the turn goes on in the daemon; the page asks again by id
            await expect(assistant(page)).to_contain_text("Half an")
            gate.set()
            await expect(assistant(page)).to_contain_text("answer, then the rest.")
            await expect(assistant(page)).not_to_have_attribute("aria-busy", "true")
            await expect(assistant(page)).to_have_count(1)
            await expect(mine(page)).to_have_count(1)
            assert len(llm.requests) == 1  # the second POST started no model call
            assert await page.evaluate("localStorage.getItem('chela_ui_pending')") is None
            # and after one more reload the stored transcript holds the same one exchange
            await page.reload()
            await expect(assistant(page)).to_contain_text("Half an answer, then the rest.")
            await expect(assistant(page)).to_have_count(1)
            await expect(mine(page)).to_have_count(1)
    finally:
        gate.set()


async def test_stop_keeps_the_partial_text_marked_stopped(tmp_path, llm, page):
    gate = asyncio.Event()
    llm.script(streamed("Partial words ", "that never come", gate=gate), text("a new answer"))
    try:
        async with ui_daemon(tmp_path, llm) as ui:
            await login(page, ui.base, mint_code(ui.cfg))
            stop = page.get_by_role("button", name="Stop")
            await expect(stop).to_be_disabled()
            await send(page, "write a lot")
            await expect(assistant(page)).to_contain_text("Partial words")
            await expect(stop).to_be_enabled()
            await stop.click()
            await expect(assistant(page)).to_contain_text("Stopped")
            await expect(assistant(page)).to_contain_text("Partial words")
            await expect(assistant(page)).not_to_have_attribute("aria-busy", "true")
            await expect(stop).to_be_disabled()
            assert "never come" not in await assistant(page).inner_text()
            # a stopped turn is not stored: after a reload the question stands unanswered
            await page.reload()
            await expect(mine(page)).to_have_count(1)
            await expect(assistant(page)).to_have_count(0)
            # twin: the next message is answered as usual
            await send(page, "again")
            await expect(assistant(page)).to_contain_text("a new answer")
    finally:
        gate.set()


PAYLOAD = (
    'Look: <img src=x onerror="alert(1)"> and <script>alert(2)</script> '
    'and [click me](javascript:alert(3)) and <a href="javascript:alert(4)">tap</a> '
    "and <iframe src=javascript:alert(5)></iframe>\n\n"
    "Fine: [the docs](https://example.com/docs), `code` and **bold**"
)


async def test_model_written_html_renders_as_text(tmp_path, llm, page):
    (tmp_path / "ws").mkdir(parents=True, exist_ok=True)
    (tmp_path / "ws" / "notes.txt").write_text('<img src=y onerror="alert(6)"> tool output')
    llm.script(tool_calls([("read", {"path": "notes.txt"})]), text(PAYLOAD))
    async with ui_daemon(tmp_path, llm) as ui:
        await login(page, ui.base, mint_code(ui.cfg))
        await send(page, '<b onmouseover="alert(7)">my own html</b>')
        for _ in range(2):  # live, then the stored transcript after a reload
            log = conversation(page)
            await expect(assistant(page)).to_contain_text('<img src=x onerror="alert(1)">')
            await expect(assistant(page)).to_contain_text("<script>alert(2)</script>")
            await expect(assistant(page)).to_contain_text("[click me](javascript:alert(3))")
            await expect(mine(page)).to_contain_text('<b onmouseover="alert(7)">my own html</b>')
            await expect(log.get_by_role("article", name="Tool: read")).to_be_visible()
            assert await log.locator("img, script, iframe, b").count() == 0
            assert await log.get_by_role("link", name="click me").count() == 0
            assert await log.get_by_role("link", name="tap").count() == 0
            for anchor in await log.locator("a").all():
                assert (await anchor.get_attribute("href")).startswith("https://")
            # twin: an https link is a link, with rel, and the Markdown subset applies
            docs = log.get_by_role("link", name="the docs")
            await expect(docs).to_have_attribute("href", "https://example.com/docs")
            await expect(docs).to_have_attribute("rel", "noopener noreferrer")
            await expect(log.locator("strong")).to_have_text("bold")
            await expect(log.locator("code")).to_have_text("code")
            await page.reload()
            await expect(
                conversation(page).get_by_role("article", name="Tool: read")
            ).to_be_visible()
        tool = conversation(page).get_by_role("article", name="Tool: read")
        await tool.get_by_text("Result").click()
        await expect(tool).to_contain_text('<img src=y onerror="alert(6)"> tool output')
        assert await conversation(page).locator("img").count() == 0
        assert page.dialogs == []  # type: ignore[attr-defined]


async def test_telegram_and_the_web_chat_share_the_main_session_live(tmp_path, llm, tg, page):
    llm.script(text("answered on telegram"), text("answered on the web"))
    async with ui_daemon(tmp_path, llm, channels=telegram_section(tg)) as ui:
        await login(page, ui.base, mint_code(ui.cfg))
        await expect(conversation(page)).to_contain_text("No messages yet")
        tg.inject_message(OWNER, "written on telegram", from_id=OWNER)
        await tg.wait_for_sent(1, timeout=15)
        # the page shows the other channel's exchange without a reload
        await expect(mine(page)).to_contain_text("written on telegram")
        await expect(assistant(page)).to_contain_text("answered on telegram")
        await send(page, "and now from the browser")
        await expect(assistant(page).last).to_contain_text("answered on the web")
        assert "written on telegram" in json.dumps(llm.requests[1]["messages"])
        assert len(tg.sent) == 1  # the web turn's reply went to the page, not to Telegram


async def test_an_attached_file_reaches_the_model(tmp_path, llm, page):
    llm.script(text("I read your file"))
    note = tmp_path / "note.txt"
    note.write_text("the secret ingredient is cardamom\n")
    async with ui_daemon(tmp_path, llm) as ui:
        await login(page, ui.base, mint_code(ui.cfg))
        async with page.expect_file_chooser() as chooser:
            await page.get_by_role("button", name="Attach file").click()
        await (await chooser.value).set_files(str(note))
        await expect(page.get_by_role("button", name="Remove note.txt")).to_be_visible()
        await send(page, "what does it say?")
        await expect(assistant(page)).to_contain_text("I read your file")
        assert "cardamom" in json.dumps(llm.requests[0]["messages"])
        await expect(page.get_by_role("button", name="Remove note.txt")).to_have_count(0)
