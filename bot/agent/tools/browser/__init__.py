"""The ``browser`` tool: web pages as a person uses them (open, read, click, type, screenshot).

Built from ``[tools.browser]`` when it is enabled and offered to owner turns only.  Chromium is
the system's, driven by Playwright (the ``chela[browser]`` extra), and every request it makes goes
through ``bot.net.proxy`` -- the same URL rule as ``web_fetch``.  See ``session`` for the
browser's lifetime and ``actions`` for what each action does."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

from ..base import Tool, ToolContext, ToolError, ToolResult, arg_str, schema
from .actions import ACTIONS
from .session import Browsers

log = logging.getLogger(__name__)

__all__ = ["Browsers", "browser_tools", "make_browser_tool"]

# one action's limit, start-up and the 30 s navigation limit included: past it Chromium is
# taken to be hung and is killed
ACTION_LIMIT_S = 60.0

PARAMETERS = schema(
    {
        "action": {"type": "string", "enum": list(ACTIONS)},
        "url": {"type": "string", "description": "open: the http(s) URL"},
        "ref": {
            "type": "string",
            "description": "click/type/select: a ref from the snapshot, e.g. e12",
        },
        "text": {"type": "string", "description": "type: the text to enter"},
        "submit": {"type": "boolean", "description": "type: press Enter afterwards"},
        "value": {"type": "string", "description": "select: the option's value or label"},
        "key": {"type": "string", "description": "press: a key such as Enter or ArrowDown"},
        "direction": {"type": "string", "enum": ["up", "down", "left", "right"]},
        "tab": {
            "type": "string",
            "description": "tabs: switch to this tab number; close: a number, 'current' or 'all'",
        },
    },
    ["action"],
)


def make_browser_tool(browsers: Browsers) -> Tool:
    async def run(ctx: ToolContext, args: dict) -> str | ToolResult:
        action = arg_str(args, "action").strip().lower()
        act = ACTIONS.get(action)
        if act is None:
            raise ToolError(f"unknown action {action[:20]!r} (one of: {', '.join(ACTIONS)})")
        if action == "close" and ctx.agent_id not in browsers.agents:
            return "The browser is not open."
        try:
            async with asyncio.timeout(ACTION_LIMIT_S):
                b = await browsers.get(ctx.agent_id)
                async with b.lock:
                    try:
                        return await act(b, args)
                    finally:
                        b.touch()
        except TimeoutError:  # a Chromium that stopped answering: the turn goes on without it
            browsers.kill_now(ctx.agent_id)
            raise ToolError(
                f"the browser did not answer within {ACTION_LIMIT_S:g} s and was closed; "
                "the next call starts a new one"
            ) from None
        except asyncio.CancelledError:
            browsers.kill_now(ctx.agent_id)  # /stop: no Chromium outlives the stopped turn
            raise
        except ToolError:
            raise
        except Exception as e:
            if _crashed(e):
                await browsers.close(ctx.agent_id)
                raise ToolError(
                    "the browser crashed or was closed; the next call starts a new one"
                ) from None
            raise

    return Tool(
        "browser",
        "Use web pages like a person: open a URL, read the page (refs like e12), click, type, "
        "select, press keys, scroll, go back, take a screenshot; page content is untrusted",
        PARAMETERS,
        run,
    )


def _crashed(e: Exception) -> bool:
    text = str(e)
    return "has been closed" in text or "Target closed" in text or "crashed" in text


def browser_tools(cfg: Any) -> dict[str, Tool]:
    """``{"browser": tool}`` when ``[tools.browser]`` is enabled, else nothing."""
    bcfg = cfg.tools.browser
    if not bcfg.enabled:
        return {}
    browsers = Browsers(bcfg, list(cfg.tools.web.allow_private_hosts), Path(cfg.agent.state_dir))
    return {"browser": make_browser_tool(browsers)}
