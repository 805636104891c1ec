"""The Inbox's "Events" in Chromium: webhooks posted while the page is open appear live with
their verdicts (an accepted one with what its turn did, a refused one as unauthorized), the
Source filter narrows the table to one trigger, a row opens to its details and its session
link, and a sender's hostile body is shown as text (no element, no script) beside a normal
one, a mail's hostile Subject likewise."""

from __future__ import annotations

from email.message import EmailMessage

import aiohttp
import pytest
import pytest_asyncio

from tests.e2e.browser.kit import SESSION_LOOP, expect, login, open_page
from tests.e2e.harness import eventually
from tests.fakes.imap import FakeImap
from tests.e2e.ui_client import mint_code, ui_config, ui_daemon
from tests.fakes.llm import text

pytestmark = SESSION_LOOP

SECRET = "browser-hook-secret-3a9f"
HOSTILE = '<img src=x onerror="window.pwned=1"><script>window.pwned=2</script>'


@pytest.fixture
def cfg(tmp_path, llm, monkeypatch):
    monkeypatch.setenv("BROWSER_HOOK_SECRET", SECRET)
    hooks = [
        {
            "name": name,
            "scheme": "token",
            "secret_env": "BROWSER_HOOK_SECRET",
            "prompt": "{body}",
            "deliver": "none",
        }
        for name in ("ci", "alerts")
    ]
    return ui_config(tmp_path, llm, hooks=hooks)


async def post_hook(base: str, name: str, body: str, secret: str = SECRET) -> int:
    headers = {"Authorization": f"Bearer {secret}", "Content-Type": "text/plain"}
    async with (
        aiohttp.ClientSession() as s,
        s.post(f"{base}/hooks/{name}", data=body.encode(), headers=headers) as r,
    ):
        await r.read()
        return r.status


async def test_events_are_listed_live_filtered_and_inert(tmp_path, llm, cfg, page):
    llm.script(text("NO_REPLY"), text("NO_REPLY"))
    async with ui_daemon(tmp_path, llm, cfg=cfg) as ui:
        await login(page, ui.base, mint_code(ui.cfg))
        await open_page(page, "Inbox")
        events = page.get_by_role("region", name="Events")
        table = events.get_by_role("table", name="Events")
        await expect(table).to_contain_text("No event yet.")
        assert await post_hook(ui.base, "ci", "build 42 passed") == 202
        assert await post_hook(ui.base, "ci", "forged", secret="not-the-secret") == 401
        assert await post_hook(ui.base, "alerts", HOSTILE) == 202
        rows = table.get_by_role("row")
        normal = rows.filter(has_text="build 42 passed")
        hostile = rows.filter(has_text="window.pwned=2")
        refused = rows.filter(has_text="unauthorized")
        # live: posted after the page loaded; each turn's result follows
        await expect(normal).to_contain_text("accepted (silent (NO_REPLY))")
        await expect(hostile).to_contain_text("accepted (silent (NO_REPLY))")
        await expect(refused).to_contain_text("ci")
        # the hostile body is its own text, and nothing of it became an element or ran
        await expect(hostile).to_contain_text(HOSTILE)
        assert await events.locator("img, script").count() == 0
        assert await page.evaluate("() => window.pwned") is None
        assert page.dialogs == []  # type: ignore[attr-defined]
        # the Source filter: one trigger's events only (the twin: all sources again)
        source = events.get_by_role("combobox", name="Source")
        await source.select_option("alerts")
        await expect(normal).to_have_count(0)
        await expect(refused).to_have_count(0)
        await expect(hostile).to_be_visible()
        await source.select_option("")
        await expect(normal).to_be_visible()
        await expect(refused).to_be_visible()
        # a row opens to its details, the hostile one as text too
        toggle = hostile.get_by_role("button", name="Details")
        await toggle.click()
        await expect(toggle).to_have_attribute("aria-expanded", "true")
        details = events.get_by_role("definition").filter(has_text="window.pwned=2")
        await expect(details).to_contain_text(HOSTILE)
        assert await events.locator("img, script").count() == 0
        await normal.get_by_role("button", name="Details").click()
        link = events.get_by_role("link", name=f"agent:{cfg.agent.id}:hook:ci")
        await link.click()
        await expect(page.get_by_role("heading", level=1, name="Sessions")).to_be_visible()
        transcript = page.get_by_role("log", name="Transcript")
        await expect(transcript).to_contain_text("build 42 passed")
    assert await page.evaluate("() => window.pwned") is None


IMAP_PASSWORD = "browser-imap-password-7c2e"
HOSTILE_SUBJECT = '<img src=x onerror="window.pwned=3">'


def mail(subject: str, sender: str) -> bytes:
    m = EmailMessage()
    m["From"], m["To"], m["Subject"] = sender, "me@example.com", subject
    m.set_content("See subject.")
    return bytes(m)


@pytest_asyncio.fixture(loop_scope="session")
async def imap():
    fake = await FakeImap(password=IMAP_PASSWORD).start()
    yield fake
    await fake.stop()


async def test_mail_subjects_are_listed_as_text(tmp_path, llm, page, imap, monkeypatch):
    monkeypatch.setenv("BROWSER_IMAP_USER", imap.user)
    monkeypatch.setenv("BROWSER_IMAP_PASSWORD", IMAP_PASSWORD)
    box = {
        "name": "inbox",
        "host": "127.0.0.1",
        "port": imap.port,
        "tls": "none",
        "username_env": "BROWSER_IMAP_USER",
        "password_env": "BROWSER_IMAP_PASSWORD",
        "from_allow": ["@example.com"],
        "prompt": "{mail}",
        "deliver": "none",
    }
    llm.script(text("NO_REPLY"), text("NO_REPLY"))
    async with ui_daemon(tmp_path, llm, cfg=ui_config(tmp_path, llm, mail=[box])) as ui:
        await eventually(lambda: imap.idling == 1, timeout=10)
        await login(page, ui.base, mint_code(ui.cfg))
        await open_page(page, "Inbox")
        imap.add(mail(HOSTILE_SUBJECT, "alice@example.com"))
        imap.add(mail("lunch on friday?", "bob@example.com"))  # the twin: a plain subject
        imap.add(mail("you won", "mallory@evil.test"))  # outside from_allow
        table = page.get_by_role("region", name="Events").get_by_role("table", name="Events")
        rows = table.get_by_role("row")
        await expect(rows.filter(has_text="lunch on friday?")).to_contain_text("mail:inbox")
        hostile = rows.filter(has_text="window.pwned=3")
        await expect(hostile).to_contain_text(HOSTILE_SUBJECT)
        await expect(rows.filter(has_text="skipped (from_allow)")).to_have_count(1)
        await hostile.get_by_role("button", name="Details").click()
        await expect(
            table.get_by_role("definition").filter(has_text="From: alice")
        ).to_contain_text(f"Subject: {HOSTILE_SUBJECT}")
        assert await table.locator("img, script").count() == 0
        assert await page.evaluate("() => window.pwned") is None
