"""The browsers: one loopback proxy for the daemon, one Chromium per agent (started on first use,
closed after ``idle_close``, killed with its process group on ``/stop`` and at exit).

The proxy (``bot.net.proxy``) is what holds every request to the URL rule; this module only
makes sure Chromium cannot go around it (the proxy flags, service workers blocked) and keeps the
page's side effects in hand: dialogs dismissed and reported, downloads quarantined and capped,
tabs over ``max_tabs`` closed oldest first."""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import logging
import os
import re
import time
from pathlib import Path
from typing import Any

from bot import fs
from bot.net import HostRules
from bot.net.proxy import GuardProxy, HostPatterns

from ..base import ToolError
from .launch import (
    browser_pid,
    chromium_args,
    chromium_env,
    find_executable,
    kill_groups,
    profile_dir,
    running_as_root,
    sandbox_note,
)

log = logging.getLogger(__name__)

NAV_TIMEOUT_MS = 30_000
_SAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")
_BACKGROUND: set[asyncio.Future] = set()


def _spawn(aw: Any) -> None:
    """Run a page callback's coroutine in the background, kept referenced until it ends."""
    fut = asyncio.ensure_future(aw)
    _BACKGROUND.add(fut)
    fut.add_done_callback(_BACKGROUND.discard)


class AgentBrowser:
    """One agent's Chromium: its tabs, and what the pages did since the last answer."""

    def __init__(self, owner: Browsers, agent_id: str) -> None:
        self.owner = owner
        self.agent_id = agent_id
        self.profile = profile_dir(owner.state_dir, agent_id)
        self.pw: Any = None
        self.context: Any = None
        self.tabs: list[Any] = []
        self.current: Any = None
        self.events: list[str] = []  # dialogs and downloads, reported with the next answer
        self.lock = asyncio.Lock()
        self.alive = False
        self.started_at = 0.0
        self._idle: asyncio.TimerHandle | None = None

    async def start(self) -> None:
        from playwright.async_api import async_playwright

        cfg = self.owner.cfg
        exe = find_executable(cfg.executable)
        if exe is None:
            raise ToolError(
                "no Chromium found (install Debian's chromium or set tools.browser.executable)"
            )
        port = await self.owner.proxy_port()
        if kill_groups(self.profile):  # a Chromium still on this profile would refuse a new one
            log.warning("browser: ended a Chromium left on profile-%s", self.agent_id)
            for _ in range(100):
                if browser_pid(self.profile) is None:
                    break
                await asyncio.sleep(0.05)
        for left in self.owner.partial_dir(self.agent_id).iterdir():  # a killed browser's
            if left.is_file() or left.is_symlink():  # half downloads: not counted to the cap
                left.unlink(missing_ok=True)
        as_root = running_as_root()
        t0 = time.monotonic()
        self.pw = await async_playwright().start()
        try:
            self.context = await self.pw.chromium.launch_persistent_context(
                str(self.profile),
                executable_path=exe,
                headless=cfg.headless,
                args=chromium_args(port, cfg.memory_mb, as_root=as_root),
                env=chromium_env(self.profile),
                chromium_sandbox=True,  # no --no-sandbox from Playwright: ours, as root only
                service_workers="block",
                accept_downloads=True,
                downloads_path=str(self.owner.partial_dir(self.agent_id)),
                timeout=NAV_TIMEOUT_MS,
            )
        except BaseException:
            await self.kill()
            raise
        self.alive = True
        self.started_at = time.monotonic() - t0
        log.info(
            "browser started agent=%s in %.2fs (%s)",
            self.agent_id,
            self.started_at,
            sandbox_note(as_root),
        )
        self.context.set_default_navigation_timeout(NAV_TIMEOUT_MS)
        self.context.set_default_timeout(5_000)
        self.context.on("page", self._adopt)
        self.context.on("close", lambda *_: setattr(self, "alive", False))
        for page in self.context.pages:
            self._adopt(page)

    def _adopt(self, page: Any) -> None:
        page.on("dialog", self._on_dialog)
        page.on("download", lambda d: _spawn(self._on_download(d)))
        page.on("close", self._forget)
        page.on("crash", self.on_crash)
        self.tabs.append(page)
        if self.current is None:
            self.current = page
        else:  # a pop-up: reported, and reachable through 'tabs'; the action's page stays current
            self.events.append(f"A new tab opened (tab {len(self.tabs) - 1}); see action 'tabs'")
        while len(self.tabs) > self.owner.cfg.max_tabs:
            oldest = self.tabs.pop(0)
            _spawn(oldest.close())

    def _forget(self, page: Any) -> None:
        if page in self.tabs:
            self.tabs.remove(page)
        if self.current is page:
            self.current = self.tabs[-1] if self.tabs else None

    def on_crash(self, page: Any) -> None:
        """A tab whose renderer died: closed and reported; the other tabs (and the browser) go
        on, and the next 'open' gets a fresh tab."""
        if page in self.tabs:
            self.events.append("A tab crashed and was closed")
        self._forget(page)
        _spawn(page.close())

    def _on_dialog(self, dialog: Any) -> None:
        if len(self.events) < 20:
            self.events.append(f"A {dialog.type} dialog was dismissed: {dialog.message[:300]}")
        _spawn(dialog.dismiss())

    async def _on_download(self, download: Any) -> None:
        cap = self.owner.cfg.download_max_mb * 1024 * 1024
        name = _SAFE_NAME.sub("_", download.suggested_filename or "download")[:120] or "download"
        partial = self.owner.partial_dir(self.agent_id)
        watch = asyncio.ensure_future(download.path())
        while not watch.done():
            if _dir_size(partial) > cap:
                await download.cancel()
                with contextlib.suppress(Exception):
                    await watch  # "canceled"
                self.events.append(
                    f"A download ({name}) was refused: over {self.owner.cfg.download_max_mb} MB"
                )
                return
            await asyncio.sleep(0.1)
        src = watch.result()
        if src is None:
            self.events.append(f"A download ({name}) failed")
            return
        size = os.stat(src).st_size
        if size > cap:
            self.events.append(f"A download ({name}) was refused: over {cap >> 20} MB")
            await download.delete()
            return
        dest = self.owner.downloads_dir() / f"{int(time.time())}-{name}"
        await download.save_as(dest)
        fs.private_file(dest)  # 0600, never opened or run
        await download.delete()
        self.events.append(f"A download was saved: {dest} ({size} bytes)")

    def page(self) -> Any:
        if self.current is None or self.current.is_closed():
            raise ToolError("no open tab: use action 'open' with a url")
        return self.current

    async def new_page(self) -> Any:
        page = await self.context.new_page()
        if page not in self.tabs:
            self._adopt(page)
        if self.events and self.events[-1].startswith("A new tab opened"):
            self.events.pop()  # our own tab, not a pop-up
        self.current = page
        return page

    def touch(self) -> None:
        if self._idle is not None:
            self._idle.cancel()
        loop = asyncio.get_running_loop()
        self._idle = loop.call_later(
            self.owner.cfg.idle_seconds,
            lambda: _spawn(self.owner.close(self.agent_id)),
        )

    async def kill(self) -> None:
        """End Chromium at once: its process group first, then Playwright's driver."""
        self.alive = False
        if self._idle is not None:
            self._idle.cancel()
        kill_groups(self.profile)
        pw, self.pw, self.context = self.pw, None, None
        self.tabs, self.current = [], None
        if pw is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(pw.stop(), 10)


class Browsers:
    """Every agent's browser, and the proxy they share."""

    def __init__(self, cfg: Any, allow_private_hosts: list[str], state_dir: Path) -> None:
        self.cfg = cfg
        self.state_dir = Path(state_dir).expanduser()
        self.rules = HostRules(allow_private_hosts)
        self.patterns = HostPatterns(cfg.allow_hosts, cfg.deny_hosts)
        self.proxy: GuardProxy | None = None
        self.agents: dict[str, AgentBrowser] = {}
        atexit.register(self._kill_all_now)

    async def proxy_port(self) -> int:
        if self.proxy is None:
            self.proxy = GuardProxy(self.rules, self.patterns)
            await self.proxy.start()
        return self.proxy.port

    def partial_dir(self, agent_id: str) -> Path:
        return fs.private_dir(self.state_dir / "browser" / "downloads" / f".partial-{agent_id}")

    def downloads_dir(self) -> Path:
        return fs.private_dir(self.state_dir / "browser" / "downloads")

    def shots_dir(self) -> Path:
        return fs.private_dir(self.state_dir / "browser" / "shots")

    async def get(self, agent_id: str) -> AgentBrowser:
        b = self.agents.get(agent_id)
        if b is not None and b.alive and b.context is not None:
            return b
        if b is not None:
            await b.kill()  # crashed or closed: the next call starts a fresh one
        b = AgentBrowser(self, agent_id)
        self.agents[agent_id] = b
        await b.start()
        return b

    async def close(self, agent_id: str) -> None:
        b = self.agents.pop(agent_id, None)
        if b is None:
            return
        if b.context is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(b.context.close(), 5)
        await b.kill()
        log.info("browser closed agent=%s", agent_id)

    def kill_now(self, agent_id: str) -> None:
        """Synchronously kill an agent's Chromium (a stopped turn); the driver is left to exit."""
        b = self.agents.pop(agent_id, None)
        if b is not None:
            b.alive = False
            if b._idle is not None:
                b._idle.cancel()
            kill_groups(b.profile)
            if b.pw is not None:
                _spawn(_stop_quietly(b.pw))

    async def aclose(self) -> None:
        for agent_id in list(self.agents):
            await self.close(agent_id)
        if self.proxy is not None:
            await self.proxy.close()
            self.proxy = None

    def _kill_all_now(self) -> None:
        for b in self.agents.values():
            kill_groups(b.profile)


def _dir_size(path: Path) -> int:
    """The bytes of the files in ``path``; a file removed meanwhile (another download done or
    cancelled) counts as 0 instead of ending the watch that enforces the cap."""
    total = 0
    for p in path.iterdir():
        with contextlib.suppress(FileNotFoundError):
            total += p.stat().st_size if p.is_file() else 0
    return total


async def _stop_quietly(pw: Any) -> None:
    with contextlib.suppress(Exception):
        await asyncio.wait_for(pw.stop(), 10)
