"""The browser suite's fixtures: one Chromium for the whole session (starting Playwright's
driver and the browser costs seconds on this machine), a fresh context (cookies, storage)
per test. Every test here runs in the session's event loop, so the daemon a test starts, the
fakes and the browser share one loop (each test module says
``pytestmark = kit.SESSION_LOOP``); ``llm`` and ``tg`` are redefined for that loop.

Without Chromium or playwright the tests skip, except under ``CI=true`` where that is a
failure (the CI script installs both)."""

from __future__ import annotations

import os
import pytest
import pytest_asyncio

from tests.e2e.browser import kit


def _unavailable() -> None:
    reason = kit.missing()
    if not reason:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"browser tests cannot run under CI: {reason}", pytrace=False)
    pytest.skip(reason)


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def browser():
    _unavailable()
    pw = await kit.async_playwright().start()
    b = await pw.chromium.launch(executable_path=kit.CHROMIUM, args=kit.CHROMIUM_ARGS)
    yield b
    await b.close()
    await pw.stop()


@pytest_asyncio.fixture(loop_scope="session")
async def page(browser):
    """A page in its own context; ``page.dialogs`` records every dialog (none may open)."""
    context = await browser.new_context()
    context.set_default_timeout(10_000)
    p = await context.new_page()
    p.dialogs = []  # type: ignore[attr-defined]

    async def dismiss(dialog):
        p.dialogs.append(dialog.message)  # type: ignore[attr-defined]
        await dialog.dismiss()

    p.on("dialog", dismiss)
    yield p
    await context.close()


@pytest_asyncio.fixture(loop_scope="session")
async def llm():
    from tests.fakes.llm import FakeLLM

    async with FakeLLM() as f:
        yield f


@pytest_asyncio.fixture(loop_scope="session")
async def tg():
    from tests.e2e import TG_TOKEN
    from tests.fakes.telegram import FakeTelegram

    f = FakeTelegram(token=TG_TOKEN, bot_username="chela_bot")
    await f.start()
    yield f
    await f.stop()
