"""Tool registry and the built-in tools.

registry = build_registry(config.tools.enabled)
ctx = ToolContext(file_root=..., session_key=..., exec_policy=ExecPolicy(...), ...)
text = await registry.execute("read", {"path": "notes.md"}, ctx)   # never raises (except cancel)
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable

from bot.prompt.context import ToolSpec

from .base import (
    ExecPolicy,
    Tool,
    ToolContext,
    ToolError,
    ToolResult,
    resolve_in_workspace,
    schema,
)

log = logging.getLogger(__name__)

# tools built from a config section of their own, offered when it turns them on
CONFIG_TOOLS = ("web_search", "web_fetch", "browser")

__all__ = [
    "ExecPolicy",
    "Tool",
    "ToolContext",
    "ToolError",
    "ToolRegistry",
    "ToolResult",
    "build_registry",
    "builtin_tools",
    "resolve_in_workspace",
    "schema",
]


class ToolRegistry:
    """An ordered set of tools.  Immutable in use: build one per config (or per session kind)."""

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for t in tools:
            self.register(t)

    def register(self, tool: Tool) -> None:
        if tool.name in self._tools:
            raise ValueError(f"tool {tool.name!r} is already registered")
        self._tools[tool.name] = tool

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def names(self) -> list[str]:
        return list(self._tools)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __len__(self) -> int:
        return len(self._tools)

    def without(self, *names: str) -> ToolRegistry:
        """A copy without the given tools (e.g. no ``sessions_spawn`` inside a sub-agent)."""
        drop = set(names)
        return ToolRegistry(t for n, t in self._tools.items() if n not in drop)

    def only(self, names: Iterable[str]) -> ToolRegistry:
        """A copy with just the given tools (a trigger turn's ``tools``)."""
        keep = set(names)
        return ToolRegistry(t for n, t in self._tools.items() if n in keep)

    def specs(self) -> list[ToolSpec]:
        return [ToolSpec(t.name, t.summary, t.parameters) for t in self._tools.values()]

    def openai_tools(self) -> list[dict]:
        """The tools' schemas as a model request carries them."""
        return [s.openai_schema() for s in self.specs()]

    async def execute(self, name: str, args: dict, ctx: ToolContext) -> str:
        """Run one tool: its text (see ``run``)."""
        return (await self.run(name, args, ctx)).text

    async def run(self, name: str, args: dict, ctx: ToolContext) -> ToolResult:
        """Run one tool.  Failures come back as text starting with ``Error:``; nothing raises."""
        tool = self._tools.get(name)
        if tool is None:
            avail = ", ".join(self._tools) or "none"
            return ToolResult(f"Error: unknown tool {name!r}. Available tools: {avail}.")
        if not isinstance(args, dict):
            return ToolResult("Error: tool arguments must be a JSON object.")
        started = time.monotonic()
        try:
            out = await tool.handler(ctx, args)
        except ToolError as e:
            log.info("tool %s refused/failed session=%s: %s", name, ctx.session_key, e)
            return ToolResult(f"Error: {e}")
        except Exception as e:
            log.exception("tool %s crashed session=%s", name, ctx.session_key)
            return ToolResult(f"Error: tool {name!r} failed: {type(e).__name__}: {e}")
        log.debug(
            "tool %s ok session=%s in %.2fs", name, ctx.session_key, time.monotonic() - started
        )
        if isinstance(out, ToolResult):
            return out
        return ToolResult("" if out is None else out if isinstance(out, str) else str(out))


def builtin_tools() -> dict[str, Tool]:
    from .exec_tool import EXEC
    from .files import EDIT, READ, WRITE
    from .memory import MEMORY_GET, MEMORY_SEARCH
    from .session import CRON, MESSAGE, SESSION_STATUS, SESSIONS_SPAWN

    return {
        t.name: t
        for t in (
            READ,
            WRITE,
            EDIT,
            EXEC,
            MEMORY_SEARCH,
            MEMORY_GET,
            MESSAGE,
            SESSION_STATUS,
            SESSIONS_SPAWN,
            CRON,
        )
    }


def build_registry(
    enabled: Iterable[str], extra: dict[str, Tool] | None = None, always: Iterable[Tool] = ()
) -> ToolRegistry:
    """The built-in tools named in ``enabled`` (config order; unknown names warned and skipped).

    ``extra`` adds tools built from the config (web_fetch, web_search, MCP tools) that are
    offered when named in ``enabled``; ``always`` are appended whatever ``enabled`` says
    (the owner's MCP tools, the browser).  Naming an ``always`` tool in ``enabled`` is
    quiet.  A ``<server>__<tool>`` name that is not known yet is skipped quietly: its MCP
    server may not have connected; so are the tools built from their own config section
    when that section leaves them off (``CONFIG_TOOLS``: ``chela check`` says why)."""
    always = list(always)
    available = {**builtin_tools(), **(extra or {})}
    known = {*available, *(t.name for t in always)}
    reg = ToolRegistry()
    for name in enabled:
        key = str(name).strip()
        tool = available.get(key)
        if tool is None:
            if key not in known and "__" not in key and key not in CONFIG_TOOLS:
                log.warning(
                    "unknown tool %r in tools.enabled; ignored (known: %s)",
                    key,
                    ", ".join(sorted(known)),
                )
            continue
        if key not in reg:
            reg.register(tool)
    for tool in always:
        if tool.name not in reg:
            reg.register(tool)
    return reg
