"""The Channels page shows the QR code of a channel waiting to be linked (a WhatsApp linked
device), follows it as it rotates and drops it once linked; the payload reaches only the
logged-in page, drawn, never as text."""

from __future__ import annotations

import contextlib
import os

import aiohttp

from bot.app.daemon import Daemon

from tests.e2e.browser.kit import SESSION_LOOP, csrf, expect, login, open_page
from tests.e2e.ui_client import UiDaemon, mint_code, ui_config
from tests.fakes.pairing_channel import PairingChannel

pytestmark = SESSION_LOOP

FIRST = "2@first-pairing-ref,aGVsbG8gd29ybGQgcHVibGlj,aWRlbnRpdHkga2V5,YWR2IHNlY3JldA=="
SECOND = "2@second-pairing-ref,aGVsbG8gd29ybGQgcHVibGlj,aWRlbnRpdHkga2V5,YWR2IHNlY3JldA=="


@contextlib.asynccontextmanager
async def linked_daemon(tmp_path, llm, linked: PairingChannel):
    """The real daemon serving the UI, with ``linked`` as the adapter of its WhatsApp
    account (put in place of the configured one before anything starts)."""
    os.environ["TEST_WA_KEY"] = "unused"
    wa = {"enabled": True, "api_key_env": "TEST_WA_KEY", "api_base": "http://127.0.0.1:9/x"}
    cfg = ui_config(tmp_path, llm, channels={"whatsapp": wa})
    d = Daemon(cfg)
    d.channels["whatsapp"] = linked
    await d.start()
    try:
        port = d.channels["http"].bound_port  # type: ignore[attr-defined]
        yield UiDaemon(d, cfg, f"http://127.0.0.1:{port}")
    finally:
        await d.stop()


async def test_the_channels_page_shows_the_qr_code_until_linked(tmp_path, llm, page):
    linked = PairingChannel(FIRST)
    async with linked_daemon(tmp_path, llm, linked) as ui:
        async with aiohttp.ClientSession() as anon:  # no session: no code
            async with anon.get(f"{ui.base}/ui/api/channels") as resp:
                assert resp.status == 401 and FIRST not in await resp.text()
        await login(page, ui.base, mint_code(ui.cfg))
        await open_page(page, "Channels")
        box = page.get_by_role("region", name="Link whatsapp")
        code = box.get_by_role("img", name="QR code to link whatsapp")
        await expect(code).to_be_visible()
        first = await code.get_attribute("src")
        assert first.startswith("data:image/svg+xml") and FIRST not in first
        answer = await page.evaluate(
            "async (token) => (await fetch('/ui/api/channels',"
            " {headers: {'X-Chela-CSRF': token}})).text()",
            await csrf(page),
        )
        assert '"pairing": {"qr": "data:image/svg+xml' in answer and FIRST not in answer
        linked.qr = SECOND  # WhatsApp rotated the code: the page follows within seconds
        await expect(code).not_to_have_attribute("src", first, timeout=10_000)
        linked.qr = None  # scanned: the box goes
        await expect(box).to_have_count(0, timeout=10_000)
        # the configured channels are still listed around it
        await expect(page.get_by_role("table", name="Channels")).to_contain_text("whatsapp")
