"""Images in the Control UI's Chat, in Chromium against the real daemon (SPEC §16.6): a photo
the owner sent on the fake Telegram, and an image the assistant sends with a media marker in
a web turn, appear in the transcript as ``img`` elements with an accessible name, their bytes
fetched from the session's media route with the CSRF header and shown through ``blob:`` URLs
(the CSP's img-src allows 'self', data: and blob:, nothing else)."""

from __future__ import annotations

import re

from tests.e2e import telegram_section
from tests.e2e.browser.kit import SESSION_LOOP, expect, login
from tests.e2e.ui_client import mint_code, ui_config, ui_daemon
from tests.fakes.llm import text
from tests.fakes.media_samples import image_bytes

pytestmark = SESSION_LOOP
OWNER = 42  # telegram_section's allow_from


def conversation(page):
    return page.get_by_role("log", name="Conversation")


# an img can be visible before it is decoded (naturalWidth 0 then): wait for its load or error,
# at most 10 s, before reading what the browser made of it
_LOADED = """(el) => new Promise((done) => {
    if (el.complete && el.naturalWidth) return done();
    el.addEventListener("load", () => done(), { once: true });
    el.addEventListener("error", () => done(), { once: true });
    setTimeout(done, 10000);
}).then(() => ({ src: el.src.split(":")[0], width: el.naturalWidth }))"""


async def shown(img) -> dict:
    """What the browser made of an img once loaded: its src scheme and decoded width."""
    return await img.evaluate(_LOADED)


def watch(page) -> tuple[list[str], list[str]]:
    """Console errors (a CSP refusal lands there) and the media requests the page made."""
    errors: list[str] = []
    media: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on(
        "request",
        lambda r: media.append(r.headers.get("x-chela-csrf", "")) if "/media/" in r.url else None,
    )
    return errors, media


async def test_the_owners_telegram_photo_shows_in_the_chat(tmp_path, llm, tg, page):
    cfg = ui_config(tmp_path, llm, channels=telegram_section(tg), media={"vision": "on"})
    llm.script(text("A red and blue square."))
    async with ui_daemon(tmp_path, llm, cfg=cfg) as ui:
        tg.inject_message(OWNER, "look at this", from_id=OWNER, photo=image_bytes(300, 200))
        await tg.wait_for_sent(1, timeout=15)
        errors, media = watch(page)
        await login(page, ui.base, mint_code(ui.cfg))
        mine = conversation(page).get_by_role("article", name="Your message")
        await expect(mine).to_contain_text("look at this")
        img = mine.get_by_role("img", name="Image from you")
        await expect(img).to_be_visible()
        await expect(img).to_have_attribute("src", re.compile("^blob:"))
        seen = await shown(img)
        assert seen["src"] == "blob" and seen["width"] > 0  # the bytes arrived and decoded
        assert media and all(media), "fetched with the CSRF header"
        assert not [e for e in errors if "Content Security Policy" in e]
        answer = conversation(page).get_by_role("article", name="Assistant message")
        await expect(answer).to_contain_text("A red and blue square.")
        assert await answer.get_by_role("img").count() == 0


async def test_an_image_the_assistant_sends_in_a_web_turn_shows(tmp_path, llm, page):
    async with ui_daemon(tmp_path, llm) as ui:
        ws = ui.cfg.agent.workspace
        (ws / "chart.png").write_bytes(image_bytes(60, 40, fmt="PNG"))
        llm.script(text("Here is the chart. [image: chart.png]"))
        errors, _ = watch(page)
        await login(page, ui.base, mint_code(ui.cfg))
        await page.get_by_role("textbox", name="Message").fill("draw me a chart")
        await page.get_by_role("button", name="Send").click()
        answer = conversation(page).get_by_role("article", name="Assistant message")
        await expect(answer).to_contain_text("Here is the chart.")
        await expect(answer).not_to_contain_text("[image:")
        img = answer.get_by_role("img", name="Image from the assistant: chart.png")
        await expect(img).to_be_visible()
        seen = await shown(img)
        assert seen["src"] == "blob" and seen["width"] == 60
        # after a reload the stored transcript shows it the same way
        await page.reload()
        img = conversation(page).get_by_role("img", name="Image from the assistant: chart.png")
        await expect(img).to_be_visible()
        assert (await shown(img))["width"] == 60
        assert not [e for e in errors if "Content Security Policy" in e]


async def test_a_photo_attached_on_the_page_shows_in_the_message_sent(tmp_path, llm, page):
    photo = tmp_path / "snap.png"
    photo.write_bytes(image_bytes(50, 50, fmt="PNG"))
    llm.script(text("A nice square."))
    async with ui_daemon(tmp_path, llm, media={"vision": "on"}) as ui:
        await login(page, ui.base, mint_code(ui.cfg))
        async with page.expect_file_chooser() as chooser:
            await page.get_by_role("button", name="Attach file").click()
        await (await chooser.value).set_files(str(photo))
        await expect(page.get_by_role("button", name="Remove snap.png")).to_be_visible()
        await page.get_by_role("textbox", name="Message").fill("what is it?")
        await page.get_by_role("button", name="Send").click()
        answer = conversation(page).get_by_role("article", name="Assistant message")
        await expect(answer).to_contain_text("A nice square.")
        mine = conversation(page).get_by_role("article", name="Your message")
        img = mine.get_by_role("img", name="Image from you: snap.png")
        await expect(img).to_be_visible()  # the stored message's image, once the turn ended
        assert (await shown(img))["src"] == "blob"


async def test_a_reply_that_is_only_an_image_shows_it(tmp_path, llm, page):
    async with ui_daemon(tmp_path, llm) as ui:
        (ui.cfg.agent.workspace / "chart.png").write_bytes(image_bytes(30, 20, fmt="PNG"))
        llm.script(text("[image: chart.png]"))
        await login(page, ui.base, mint_code(ui.cfg))
        await page.get_by_role("textbox", name="Message").fill("only the chart")
        await page.get_by_role("button", name="Send").click()
        img = conversation(page).get_by_role("img", name="Image from the assistant: chart.png")
        await expect(img).to_be_visible()
        await page.reload()
        answer = conversation(page).get_by_role("article", name="Assistant message")
        await expect(answer.get_by_role("img", name="chart.png")).to_be_visible()
        assert (await shown(answer.get_by_role("img")))["width"] == 30
