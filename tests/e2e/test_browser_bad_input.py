"""The browser tool's bad input, end to end on the real Chromium: a page that never loads, a
100 MB download (announced and not), an endless alert loop, a crashed renderer, a ref from a
page that is gone.  Each is a tool error in one sentence (or a note), the next call works, and
after a crash the next call gets a fresh browser.  The site is the namespace's public address
(tests/e2e/browser_site.py); the navigation limit is shortened so a test takes seconds."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
from pathlib import Path

import pytest
import pytest_asyncio
from aiohttp import web

from bot.agent.tools.base import ToolContext, ToolError
from bot.config.browser import BrowserConfig
from tests.e2e.browser_site import CHROMIUM, PUBLIC, namespace, public_route

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(120)]

NAV_LIMIT_MS = 4_000
BIG = 100 * 1024 * 1024

PAGES = {
    "/": "<title>Home</title><h1>Home</h1><a href=/two>Two</a>",
    "/two": "<title>Two</title><h1>Two</h1><button>First</button><button>Second</button>",
    "/files": "<title>Files</title><a href=/big.bin>sized</a><a href=/stream.bin>unsized</a>"
    "<a href=/small.txt>small</a>",
    "/alerts": "<title>Alerts</title><script>for(;;){alert('again')}</script>",
}


class Public:
    """The public site: pages, a page that never answers, and 100 MB files; it counts what
    it sent of the big files."""

    def __init__(self) -> None:
        self.sent = 0

    async def start(self) -> Public:
        async def any_path(request: web.Request) -> web.StreamResponse:
            if request.path == "/never":
                await asyncio.sleep(3600)
            if request.path in ("/big.bin", "/stream.bin"):
                return await self.big(request)
            if request.path == "/small.txt":
                return web.Response(
                    body=b"y" * 1000,
                    headers={"Content-Disposition": 'attachment; filename="small.txt"'},
                )
            html = PAGES.get(request.path, "<title>Other</title><p>ok</p>")
            return web.Response(text=html, content_type="text/html")

        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", any_path)
        self.runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.1)
        await self.runner.setup()
        await web.TCPSite(self.runner, PUBLIC, 80).start()
        return self

    async def big(self, request: web.Request) -> web.StreamResponse:
        headers = {
            "Content-Type": "application/octet-stream",
            "Content-Disposition": f'attachment; filename="{request.path.lstrip("/")}"',
        }
        if request.path == "/big.bin":
            headers["Content-Length"] = str(BIG)
        resp = web.StreamResponse(headers=headers)
        await resp.prepare(request)
        chunk = b"x" * 65536
        with contextlib.suppress(ConnectionError):
            while self.sent < BIG:
                await resp.write(chunk)
                self.sent += len(chunk)
        return resp

    async def close(self) -> None:
        await self.runner.cleanup()


def resolve_to_public(host, port, family=0, type=0, proto=0, flags=0):
    if host.endswith(".test"):
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (PUBLIC, port or 80))]
    raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")


@pytest.fixture(scope="module")
def netns():
    with namespace():
        yield


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def world(netns, tmp_path_factory):
    from bot.agent.tools.browser import Browsers, make_browser_tool
    from bot.agent.tools.browser import session

    mp = pytest.MonkeyPatch()
    mp.setattr(socket, "getaddrinfo", resolve_to_public)
    mp.setattr(session, "NAV_TIMEOUT_MS", NAV_LIMIT_MS)
    with public_route():
        site = await Public().start()
        state = tmp_path_factory.mktemp("state")
        browsers = Browsers(BrowserConfig(executable=CHROMIUM), [], state)
        w = type("World", (), {})()
        w.site, w.state, w.browsers, w.tool = site, state, browsers, make_browser_tool(browsers)
        w.ctx = ToolContext(file_root=state, agent_id="main")
        w.profile = state / "browser" / "profile-main"
        yield w
        await browsers.aclose()
        await site.close()
    mp.undo()


async def call(w, **args) -> str:
    return await w.tool.handler(w.ctx, args)


async def error(w, **args) -> str:
    with pytest.raises(ToolError) as e:
        await call(w, **args)
    text = str(e.value)
    assert "\n" not in text and len(text) < 300, text  # one sentence
    return text


def ref_of(snapshot: str, text: str) -> str:
    line = next(ln for ln in snapshot.splitlines() if text in ln)
    return line.split("[ref=", 1)[1].split("]", 1)[0]


def renderers(profile: Path) -> list[int]:
    """The renderer processes of this profile's Chromium (in the browser's process group)."""
    from bot.agent.tools.browser.launch import browser_pid

    browser = browser_pid(profile)
    assert browser is not None
    out = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                args = Path(f"/proc/{entry.name}/cmdline").read_bytes()  # rewritten by Chromium
                if b" --type=renderer " in args and os.getpgid(int(entry.name)) == browser:
                    out.append(int(entry.name))
    return out


async def test_a_page_that_never_loads_is_one_sentence_and_the_next_open_works(world):
    err = await error(world, action="open", url="http://site.test/never")
    assert err.startswith("the page did not load") and "Timeout" in err
    page = await call(world, action="open", url="http://site.test/")
    assert "Title: Home" in page


@pytest.mark.parametrize("path", ["big.bin", "stream.bin"])
async def test_a_100_mb_download_is_cut_off_and_not_kept(world, path):
    page = await call(world, action="open", url="http://site.test/files")
    link = "sized" if path == "big.bin" else "unsized"
    world.site.sent = 0
    answer = await call(world, action="click", ref=ref_of(page, f'link "{link}"'))
    for _ in range(120):
        if "was refused: over 25 MB" in answer:
            break
        await asyncio.sleep(0.25)
        answer = await call(world, action="snapshot")
    assert f"A download ({path}) was refused: over 25 MB" in answer
    assert world.site.sent < BIG  # stopped, not fetched whole
    downloads = world.state / "browser" / "downloads"
    for _ in range(40):  # Chromium removes a cancelled download's partial file itself
        kept = [p for p in downloads.rglob("*") if p.is_file()]
        if not kept:
            break
        await asyncio.sleep(0.25)
    assert kept == [], [(p, p.stat().st_size) for p in kept]
    assert "Title: Home" in await call(world, action="open", url="http://site.test/")


async def test_a_partial_download_left_by_a_killed_browser_is_not_counted(world):
    """What a killed browser left half downloaded is cleared when the next one starts, so it
    does not count against the cap of every download after it."""
    await world.browsers.close("main")
    partial = world.state / "browser" / "downloads" / ".partial-main"
    partial.mkdir(parents=True, exist_ok=True)
    (partial / "left.crdownload").write_bytes(b"z" * (26 * 1024 * 1024))
    page = await call(world, action="open", url="http://site.test/files")
    answer = await call(world, action="click", ref=ref_of(page, 'link "small"'))
    for _ in range(40):
        if "A download" in answer:
            break
        await asyncio.sleep(0.25)
        answer = await call(world, action="snapshot")
    assert "A download was saved" in answer and "(1000 bytes)" in answer
    assert not (partial / "left.crdownload").exists()


async def test_an_endless_alert_loop_does_not_hold_the_tool(world):
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    with contextlib.suppress(ToolError):  # a page that never finishes loading, or a note
        answer = await call(world, action="open", url="http://site.test/alerts")
        assert "dialog was dismissed: again" in answer
    assert loop.time() - t0 < NAV_LIMIT_MS / 1000 + 10
    page = await call(world, action="open", url="http://site.test/two")
    assert "Title: Two" in page


async def test_a_crashed_renderer_is_one_sentence_then_a_fresh_browser(world):
    await call(world, action="open", url="http://site.test/")
    pids = renderers(world.profile)
    assert pids
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, 9)
    err = await error(world, action="snapshot")
    assert "crashed" in err or "open" in err
    page = await call(world, action="open", url="http://site.test/two")
    assert "Title: Two" in page


async def test_a_hung_chromium_is_one_sentence_then_a_fresh_browser(world, monkeypatch):
    import bot.agent.tools.browser as tool_module
    from bot.agent.tools.browser.launch import browser_pid

    await call(world, action="open", url="http://site.test/")
    pid = browser_pid(world.profile)
    assert pid is not None
    monkeypatch.setattr(tool_module, "ACTION_LIMIT_S", 3.0)
    os.killpg(pid, signal.SIGSTOP)  # every process of it stops answering
    try:
        err = await error(world, action="snapshot")
    finally:
        with contextlib.suppress(OSError):
            os.killpg(pid, signal.SIGCONT)
    assert "did not answer within 3 s" in err
    monkeypatch.undo()  # the usual limit for the fresh browser's start-up
    page = await call(world, action="open", url="http://site.test/two")
    assert "Title: Two" in page and browser_pid(world.profile) != pid


async def test_a_ref_from_a_page_that_is_gone_is_refused(world):
    home = await call(world, action="open", url="http://site.test/")
    old = ref_of(home, 'link "Two"')
    two = await call(world, action="click", ref=old)
    assert "Title: Two" in two
    err = await error(world, action="click", ref=old)
    assert f"ref {old}" in err
    assert "Title: Two" in await call(world, action="snapshot")  # nothing was clicked
    now = await call(world, action="click", ref=ref_of(two, 'button "First"'))  # twin
    assert "Title: Two" in now
