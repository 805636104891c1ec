"""The browser tool's actions: each takes the agent's browser and the call's arguments and
answers with text.  No action runs JavaScript chosen by the model; everything a page controls
(title, URL, tree, dialog texts, download names, refused hosts) goes back fenced as untrusted."""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit

from bot import fs
from bot.rules.untrusted import untrusted_block

from ..base import ToolError, ToolResult, arg_bool, arg_str
from .session import AgentBrowser

_REF = re.compile(r"[a-z]?[0-9a-z]{1,12}")
_KEYS = re.compile(r"[A-Za-z0-9+]{1,40}")
_SCROLL = {"down": (0, 600), "up": (0, -600), "right": (600, 0), "left": (-600, 0)}


def _check_url(url: str) -> str:
    """Only http(s) is opened; ``file:``, ``chrome:``, ``data:``, ``javascript:`` and the rest
    are refused here, before Chromium sees them."""
    scheme = urlsplit(url.strip()).scheme.lower()
    if scheme not in ("http", "https"):
        raise ToolError(
            f"refused: only http and https pages are opened, not {scheme or 'this'}: URLs"
        )
    return url.strip()


async def snapshot(b: AgentBrowser, since: float | None = None) -> str:
    page = b.page()
    if urlsplit(page.url).scheme not in ("http", "https", "about"):
        bad = urlsplit(page.url).scheme
        await page.goto("about:blank")
        raise ToolError(f"refused: the page went to a {bad}: URL, which is not opened")
    try:
        tree = await page.aria_snapshot(mode="ai", timeout=10_000)
        title = await page.title()
    except Exception as e:  # a page navigating away mid-read, or one that crashed
        if "crashed" in str(e):
            b.on_crash(page)
            raise ToolError("the tab crashed and was closed; use action 'open' again") from None
        raise ToolError(
            f"could not read the page ({type(e).__name__}); try 'snapshot' again"
        ) from e
    body = f"Title: {title}\nURL: {page.url}\n\n{tree}"
    limit = b.owner.cfg.snapshot_max_chars
    if len(body) > limit:
        body = body[:limit] + f"\n[... cut at {limit} characters]"
    notes = _notes(b, since)
    if notes:
        body += "\n\n" + "\n".join(notes)
    return untrusted_block("Browser page", page.url, body)


def _notes(b: AgentBrowser, since: float | None) -> list[str]:
    notes, b.events = list(b.events), []
    proxy = b.owner.proxy
    if since is not None and proxy is not None:
        seen: set[str] = set()
        for r in proxy.refusals:
            if _blocked(r.reason) and r.at >= since and r.host not in seen and len(seen) < 5:
                seen.add(r.host)
                notes.append(f"A request to {r.host} was refused: {r.reason}")
    return notes


def _refusal(b: AgentBrowser, since: float, url: str | None = None) -> str | None:
    """Why the proxy refused ``url``'s host (any host when None) since ``since``, if it did."""
    proxy = b.owner.proxy
    if proxy is None:
        return None
    host = (urlsplit(url).hostname or "").lower() if url else None
    for r in reversed(proxy.refusals):
        if r.at >= since and (r.host == host or (host is None and _blocked(r.reason))):
            return r.reason
    return None


def _blocked(reason: str) -> bool:
    return reason.startswith(("blocked", "bad URL"))


async def act_open(b: AgentBrowser, args: dict) -> str:
    url = _check_url(arg_str(args, "url"))
    page = b.current if b.current is not None and not b.current.is_closed() else None
    page = page or await b.new_page()
    t0 = time.monotonic()
    try:
        resp = await _goto(page, url)
    except Exception as e:
        with contextlib.suppress(Exception):
            await page.close()  # its error page may still be reloading: the next open starts afresh
        reason = _refusal(b, t0, url) or _refusal(b, t0)
        if reason:
            raise ToolError(f"refused: {reason}") from None
        raise ToolError(f"the page did not load: {_first_line(e)}") from None
    reason = _refusal(b, t0, resp.url) if resp is not None and resp.status == 403 else None
    if reason:
        raise ToolError(f"refused: {reason}")
    return await snapshot(b, t0)


async def _goto(page: Any, url: str) -> Any:
    """Navigate; once more if a leftover error page of the last refusal interrupted it."""
    try:
        return await page.goto(url, wait_until="load")
    except Exception as e:
        if "interrupted by another navigation" not in str(e):
            raise
    return await page.goto(url, wait_until="load")


def _locator(b: AgentBrowser, args: dict) -> Any:
    ref = arg_str(args, "ref").strip().removeprefix("ref=")
    if not _REF.fullmatch(ref):
        raise ToolError(f"'{ref[:20]}' is not a ref (refs look like e12)")
    return b.page().locator(f"aria-ref={ref}"), ref


async def _on_ref(b: AgentBrowser, args: dict, do: Callable[[Any], Awaitable[Any]]) -> str:
    loc, ref = _locator(b, args)
    t0 = time.monotonic()
    try:
        await do(loc)
    except ToolError:
        raise
    except Exception as e:
        raise ToolError(f"ref {ref} did not work ({_first_line(e)}); take a new snapshot") from None
    await _settle(b)
    return await snapshot(b, t0)


async def _settle(b: AgentBrowser) -> None:
    page = b.page()
    with contextlib.suppress(Exception):
        await page.wait_for_load_state("load", timeout=30_000)


async def act_click(b: AgentBrowser, args: dict) -> str:
    return await _on_ref(b, args, lambda loc: loc.click(timeout=5_000))


async def act_type(b: AgentBrowser, args: dict) -> str:
    text = arg_str(args, "text", required=False)
    submit = arg_bool(args, "submit")

    async def do(loc: Any) -> None:
        await loc.fill(text, timeout=5_000)
        if submit:
            await loc.press("Enter", timeout=5_000)

    return await _on_ref(b, args, do)


async def act_select(b: AgentBrowser, args: dict) -> str:
    value = arg_str(args, "value")
    return await _on_ref(b, args, lambda loc: loc.select_option(value, timeout=5_000))


async def act_press(b: AgentBrowser, args: dict) -> str:
    key = arg_str(args, "key")
    if not _KEYS.fullmatch(key):
        raise ToolError("key must be a key name such as Enter, Tab, ArrowDown or Control+A")
    t0 = time.monotonic()
    try:
        await b.page().keyboard.press(key)
    except Exception as e:
        raise ToolError(f"could not press {key}: {_first_line(e)}") from None
    await _settle(b)
    return await snapshot(b, t0)


async def act_scroll(b: AgentBrowser, args: dict) -> str:
    direction = arg_str(args, "direction", required=False, default="down").lower()
    if direction not in _SCROLL:
        raise ToolError("direction must be up, down, left or right")
    t0 = time.monotonic()
    await b.page().mouse.wheel(*_SCROLL[direction])
    return await snapshot(b, t0)


async def act_back(b: AgentBrowser, args: dict) -> str:
    t0 = time.monotonic()
    try:
        await b.page().go_back(wait_until="load")
    except Exception as e:
        raise ToolError(f"could not go back: {_first_line(e)}") from None
    return await snapshot(b, t0)


async def act_snapshot(b: AgentBrowser, args: dict) -> str:
    return await snapshot(b)


async def act_screenshot(b: AgentBrowser, args: dict) -> ToolResult:
    """The page as a PNG under ``shots/``: named in the text (a media marker can send it) and
    returned as an image, which a model that can see is shown (bot.agent.loop)."""
    png = await b.page().screenshot(type="png", timeout=10_000)
    shots = b.owner.shots_dir()
    fs.prune_older_than(shots, 1)
    path = (
        shots / f"{b.agent_id}-{time.strftime('%Y%m%d-%H%M%S')}-{time.monotonic_ns() % 10**6}.png"
    )
    fs.write_private(path, png)
    text = (
        f"Screenshot saved ({len(png)} bytes): {path}\n"
        f"To send it to the user, put [IMAGE:{path}] in the reply."
    )
    return ToolResult(text, (path,))


async def act_tabs(b: AgentBrowser, args: dict) -> str:
    """The open tabs; with ``tab``, switch to that one and answer with its page."""
    tab = arg_str(args, "tab", required=False)
    if tab:
        try:
            b.current = b.tabs[int(tab)]
        except (ValueError, IndexError):
            raise ToolError(f"no tab {tab[:10]!r}: see action 'tabs'") from None
        return await snapshot(b)
    lines = []
    for i, page in enumerate(b.tabs):
        mark = "*" if page is b.current else " "
        lines.append(f"{mark}{i}: {await page.title()} <{page.url}>")
    return untrusted_block("Browser tabs", "the open tabs", "\n".join(lines) or "(no tabs)")


async def act_close(b: AgentBrowser, args: dict) -> str:
    tab = arg_str(args, "tab", required=False, default="current")
    if tab == "all":
        if b.context is not None:
            await b.context.clear_cookies()  # a fresh start: logins are forgotten
        await b.owner.close(b.agent_id)
        return "Closed the browser and cleared its cookies."
    if tab == "current":
        page = b.page()
    else:
        try:
            page = b.tabs[int(tab)]
        except (ValueError, IndexError):
            raise ToolError(f"no tab {tab[:10]!r}: see action 'tabs'") from None
    await page.close()
    return f"Closed the tab; {len(b.tabs)} left."


ACTIONS: dict[str, Callable[[AgentBrowser, dict], Awaitable[str | ToolResult]]] = {
    "open": act_open,
    "snapshot": act_snapshot,
    "click": act_click,
    "type": act_type,
    "select": act_select,
    "press": act_press,
    "scroll": act_scroll,
    "back": act_back,
    "screenshot": act_screenshot,
    "tabs": act_tabs,
    "close": act_close,
}


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return (text[0] if text else type(e).__name__)[:200]
