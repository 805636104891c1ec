"""MCP client: tools from ``[[mcp.servers]]``, on the official ``mcp`` SDK.

One long-lived task per server owns its connection (stdio child process or streamable
HTTP session): it connects, lists the tools, then keeps the session open and checks it
with a ping every ``PING_INTERVAL``; a dead connection is reopened with exponential
backoff.  Nothing here blocks start-up: ``McpManager.start()`` only creates the tasks,
and ``on_change`` is called whenever the set of offered tools changes, so the agent can
swap in new tool registries (and the prompt changes only then).

Tools are named ``<server>__<tool>``.  Once listed they stay offered while their server
reconnects (the prompt stays stable); a call meanwhile returns a clear tool error.

The SDK is an optional extra (``pip install 'chela[mcp]'``); without it configured
servers are reported as unavailable and no MCP tools are offered.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from collections.abc import Callable

from bot.agent.tools.base import Tool, ToolContext, ToolError
from bot.config.env_values import expand
from bot.rules.untrusted import clean_inline, untrusted_block
from channels.retry import Backoff

from .diagnose import (
    StderrCapture,
    disabled_tools_warnings,
    refused_credentials,
    server_secrets,
    tool_matches,
    unmatched_tool_names,
    unmatched_warning,
    with_stderr,
)
from .results import render_result
from .schema import normalize_schema, tool_name

__all__ = [
    "SDK_MISSING",
    "McpManager",
    "McpServer",
    "RemoteTool",
    "ServerStatus",
    "default_log_dir",
    "describe_error",
    "disabled_tools_warnings",
    "render_result",
    "sdk_available",
]

log = logging.getLogger("chela.mcp")

PING_INTERVAL = 15.0  # seconds between liveness checks of an open session
RETRY_MIN = 1.0
RETRY_MAX = 60.0


def sdk_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("mcp") is not None


SDK_MISSING = "the MCP SDK is not installed: pip install 'chela[mcp]'"


@dataclass
class RemoteTool:
    name: str  # as Chela offers it: <server>__<tool>
    remote: str  # as the server calls it
    description: str
    schema: dict[str, Any]


@dataclass
class ServerStatus:
    name: str
    transport: str
    state: str = "starting"  # starting | connected | reconnecting | failed | stopped
    error: str = ""
    tools: list[RemoteTool] = field(default_factory=list)
    connected_at: float = 0.0
    attempts: int = 0
    stderr_tail: list[str] = field(default_factory=list)  # a failed attempt's last stderr lines
    remote_tools: list[str] = field(default_factory=list)  # every tool, as the server names it
    warnings: list[str] = field(default_factory=list)  # enabled/disabled_tools matching nothing


def _leaf(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def describe_error(exc: BaseException) -> str:
    e = _leaf(exc)
    if isinstance(e, (TimeoutError, asyncio.TimeoutError)):
        return "timed out"
    if isinstance(e, FileNotFoundError):
        return f"command not found: {e.filename or e}"
    msg = str(e) or type(e).__name__
    return f"{type(e).__name__}: {msg}" if type(e).__name__ not in msg else msg


class McpServer:
    """One configured server and the task that keeps it connected."""

    def __init__(
        self,
        cfg,
        *,
        log_dir: Path | None = None,
        on_change: Callable[[McpServer], None] | None = None,
    ) -> None:
        self.cfg = cfg
        self.name: str = cfg.name
        self.status = ServerStatus(cfg.name, "stdio" if cfg.command else "http")
        self.session: Any = None
        self._log_dir = log_dir
        self._on_change = on_change
        self._stop = asyncio.Event()
        self._broken = asyncio.Event()
        self._connected = asyncio.Event()
        self._http_status = 0  # the last HTTP error status the server answered
        self._up_since = 0.0
        self.task: asyncio.Task | None = None

    # -------------------------------------------------------------------- lifecycle
    def start(self) -> None:
        if self.task is None:
            self.task = asyncio.create_task(self._run(), name=f"mcp:{self.name}")

    async def stop(self) -> None:
        self._stop.set()
        self._broken.set()
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.wait_for(asyncio.shield(self.task), 5)
        self.session = None
        self.status.state = "stopped"

    async def wait_connected(self, timeout: float) -> bool:
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._connected.wait(), timeout)
        return self.session is not None

    async def _run(self) -> None:
        backoff = Backoff(RETRY_MIN, RETRY_MAX)
        while not self._stop.is_set():
            self.status.attempts += 1
            self._up_since = 0.0
            capture = StderrCapture(self._stderr_file()) if self.cfg.command else None
            self._http_status = 0
            try:
                await self._attempt(capture)
            except asyncio.CancelledError:
                if self._stop.is_set():
                    break
                raise
            except BaseException as e:
                if isinstance(e, (KeyboardInterrupt, SystemExit)):
                    raise
                self._failed(e, capture)
            finally:
                self.session = None
                if capture is not None:
                    capture.close()
            if self._stop.is_set():
                break
            if self._up_since and time.time() - self._up_since > RETRY_MAX:
                backoff.reset()
            if not self.status.error:
                self.status.error = "the connection was lost"
            self.status.state = "reconnecting" if self.status.tools else "failed"
            self._connected.set()  # a waiter learns about the failure too
            delay = backoff.next()
            log.error("mcp server %s: %s (retrying in %.0fs)", self.name, self.status.error, delay)
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._stop.wait(), delay)
            self._connected.clear()

    async def _attempt(self, capture: StderrCapture | None) -> None:
        """One connection: open it, list the tools, then watch it until it breaks."""
        async with contextlib.AsyncExitStack() as stack:
            async with asyncio.timeout(self.cfg.connect_timeout_seconds):
                session = await self._open(stack, capture)
                tools = await self._list_tools(session)
            self._became_connected(session, tools)
            await self._watch(session)

    def _became_connected(self, session: Any, tools: list[RemoteTool]) -> None:
        self._broken.clear()
        self.session = session
        self.status.state, self.status.error, self.status.stderr_tail = "connected", "", []
        self.status.connected_at = self._up_since = time.time()
        changed = [(t.name, t.description, t.schema) for t in tools] != [
            (t.name, t.description, t.schema) for t in self.status.tools
        ]
        self.status.tools = tools
        self._connected.set()
        log.info(
            "mcp server %s connected (%s): %d tool(s)", self.name, self.status.transport, len(tools)
        )
        if changed and self._on_change is not None:
            self._on_change(self)

    def _failed(self, exc: BaseException, capture: StderrCapture | None) -> None:
        """The error of a failed attempt, with what the server said about it."""
        if self._http_status in (401, 403):
            error = refused_credentials(self.cfg, self._http_status)
        else:
            error = describe_error(exc)
        tail = capture.tail(server_secrets(self.cfg)) if capture is not None else []
        self.status.stderr_tail = tail
        self.status.error = with_stderr(error, tail)

    async def _open(self, stack: contextlib.AsyncExitStack, capture: StderrCapture | None = None):
        from mcp import ClientSession

        cfg = self.cfg
        if cfg.command:
            from mcp import StdioServerParameters
            from mcp.client.stdio import stdio_client

            params = StdioServerParameters(
                command=cfg.command,
                args=list(cfg.args),
                env={k: expand(v) for k, v in cfg.env.items()} or None,
                cwd=cfg.cwd or None,
            )
            capture = capture or stack.enter_context(contextlib.closing(StderrCapture()))
            errlog = capture.file
            read, write = await stack.enter_async_context(stdio_client(params, errlog=errlog))
        else:
            from mcp.client.streamable_http import streamable_http_client

            headers = {}
            for header, env in cfg.headers_env.items():
                value = os.environ.get(env, "")
                if not value:
                    raise RuntimeError(f"environment variable {env} (header {header}) is empty")
                headers[header] = value
            client = await stack.enter_async_context(
                _http_client(headers, cfg.timeout_seconds, self._saw_response)
            )
            streams = await stack.enter_async_context(
                streamable_http_client(cfg.url, http_client=client)
            )
            read, write = streams[0], streams[1]
        session = await stack.enter_async_context(ClientSession(read, write))
        await session.initialize()
        return session

    def _stderr_file(self):
        """Where a stdio server's stderr goes: a private log file in the state dir, opened
        for reading too (None: a temporary file, kept only to tell why a start failed)."""
        if self._log_dir is None:
            return None
        try:
            from bot.fs import private_dir

            private_dir(self._log_dir)
            path = self._log_dir / f"mcp-{self.name}.log"
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600)
            return os.fdopen(fd, "a+", buffering=1)
        except OSError:
            return None

    async def _saw_response(self, response: Any) -> None:
        if response.status_code >= 400:
            self._http_status = response.status_code

    async def _list_tools(self, session) -> list[RemoteTool]:
        from mcp import types

        out: list[RemoteTool] = []
        remotes: list[str] = []
        cursor = None
        for _ in range(50):
            res = await session.list_tools(
                params=types.PaginatedRequestParams(cursor=cursor) if cursor else None
            )
            for t in res.tools:
                remotes.append(t.name)
                if not self._offered(t.name):
                    continue
                schema = getattr(t, "input_schema", None) or getattr(t, "inputSchema", None) or {}
                # the server's words: invisible and bidi characters removed
                desc = clean_inline(t.description or t.title or "", 1024)
                out.append(
                    RemoteTool(tool_name(self.name, t.name), t.name, desc, normalize_schema(schema))
                )
            cursor = getattr(res, "next_cursor", None) or getattr(res, "nextCursor", None)
            if not cursor:
                break
        self._check_tool_names(remotes)
        seen: set[str] = set()
        uniq = []
        for t in out:
            if t.name.lower() not in seen:
                seen.add(t.name.lower())
                uniq.append(t)
        return uniq

    def _offered(self, remote: str) -> bool:
        """``enabled_tools``/``disabled_tools`` take the server's name or ``<server>__<tool>``."""
        cfg = self.cfg
        if cfg.enabled_tools and not tool_matches(self.name, remote, cfg.enabled_tools):
            return False
        return not tool_matches(self.name, remote, cfg.disabled_tools)

    def _check_tool_names(self, remotes: list[str]) -> None:
        """Entries of enabled/disabled_tools that match no tool: a warning, logged once."""
        warnings = [
            unmatched_warning(self.name, key, name)
            for key in ("enabled_tools", "disabled_tools")
            for name in unmatched_tool_names(self.name, getattr(self.cfg, key), remotes)
        ]
        for w in warnings:
            if w not in self.status.warnings:
                log.warning("%s", w)
        self.status.remote_tools, self.status.warnings = remotes, warnings

    async def _watch(self, session) -> None:
        while not self._stop.is_set() and not self._broken.is_set():
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._broken.wait(), PING_INTERVAL)
            if self._broken.is_set() or self._stop.is_set():
                break
            async with asyncio.timeout(min(10.0, self.cfg.timeout_seconds)):
                await session.send_ping()
        if not self._stop.is_set():
            raise ConnectionError(self.status.error or "the connection was lost")

    # ------------------------------------------------------------------------ calls
    async def call(self, tool: RemoteTool, args: dict) -> str:
        session = self.session
        if session is None:
            why = self.status.error or "still connecting"
            raise ToolError(
                f"MCP server {self.name!r} is not connected ({why}); Chela keeps reconnecting, "
                "try again later"
            )
        timeout = self.cfg.timeout_seconds
        try:
            async with asyncio.timeout(timeout):
                res = await session.call_tool(tool.remote, args, read_timeout_seconds=timeout)
        except TimeoutError:
            raise ToolError(
                f"timeout: MCP tool {tool.name} did not answer within {timeout:g}s"
            ) from None
        except asyncio.CancelledError:
            raise
        except Exception as e:
            code = getattr(e, "code", None)
            msg = getattr(e, "message", None) or str(e)
            if code is not None and code != _connection_closed() and "closed" not in msg.lower():
                if "timed out" in msg.lower():
                    raise ToolError(
                        f"timeout: MCP tool {tool.name} did not answer within {timeout:g}s"
                    ) from None
                fenced = untrusted_block(
                    f"Error text of MCP tool {tool.name}", f"MCP server {self.name}", msg[:2000]
                )
                raise ToolError(
                    f"MCP server {self.name!r} refused the call to {tool.remote}.\n{fenced}"
                ) from None
            self.status.error = f"connection lost during a call: {describe_error(e)}"
            self._broken.set()
            raise ToolError(
                f"MCP server {self.name!r} connection was lost ({describe_error(e)}); "
                "Chela is reconnecting, try again later"
            ) from None
        text = render_result(res)
        source = f"MCP server {self.name}"
        if getattr(res, "is_error", None) or getattr(res, "isError", None):
            # the error text is the server's too: data, fenced like a result
            fenced = untrusted_block(f"Error text of MCP tool {tool.name}", source, text[:2000])
            raise ToolError(f"MCP tool {tool.name} failed.\n{fenced}")
        return untrusted_block(f"Result of MCP tool {tool.name}", source, text)

    def chela_tools(self) -> list[Tool]:
        out = []
        for rt in self.status.tools:
            out.append(
                Tool(
                    rt.name,
                    rt.description or f"{rt.remote} (from MCP server {self.name})",
                    rt.schema,
                    self._handler(rt),
                )
            )
        return out

    def _handler(self, rt: RemoteTool):
        async def handler(ctx: ToolContext, args: dict) -> str:
            return await self.call(rt, args)

        return handler


def _connection_closed() -> int:
    try:
        from mcp_types import CONNECTION_CLOSED

        return CONNECTION_CLOSED
    except ImportError:
        return -32000


def _http_client(headers: dict[str, str], timeout: float, on_response: Any = None):
    """The HTTP client for a streamable-HTTP server: the SDK's own defaults (30 s to connect and
    write, a long read timeout because the server holds its event stream open, redirects left to
    the transport), built here from public API rather than the SDK's private helper."""
    import httpx2

    return httpx2.AsyncClient(
        headers=headers or None,
        timeout=httpx2.Timeout(max(timeout, 30.0), read=300.0),
        event_hooks={"response": [on_response]} if on_response else None,
    )


class McpManager:
    """All configured servers.  ``tools()`` is what the owner's turns are offered."""

    def __init__(
        self, servers, *, log_dir: Path | None = None, on_change: Callable[[], None] | None = None
    ) -> None:
        self.on_change = on_change
        self.available = sdk_available()
        self.servers: dict[str, McpServer] = {}
        for s in servers:
            if s.enabled:
                self.servers[s.name] = McpServer(s, log_dir=log_dir, on_change=self._changed)
        if self.servers and not self.available:
            for srv in self.servers.values():
                srv.status.state, srv.status.error = "failed", SDK_MISSING
            log.error("mcp: %d server(s) configured but %s", len(self.servers), SDK_MISSING)

    def _changed(self, _srv: McpServer) -> None:
        if self.on_change is not None:
            try:
                self.on_change()
            except Exception:
                log.exception("mcp: tool change listener failed")

    def start(self) -> None:
        """Start every connection task; returns at once."""
        if not self.available:
            return
        for srv in self.servers.values():
            srv.start()

    async def stop(self) -> None:
        await asyncio.gather(*(s.stop() for s in self.servers.values()), return_exceptions=True)

    async def settled(self) -> None:
        """Wait until every server has connected or failed its first attempt.

        The daemon never waits (a slow server must not delay the channels), but a one-shot entry
        point such as `chela chat -m` or `chela heartbeat` would otherwise run its only turn
        before the tools exist.  Bounded by each server's `connect_timeout_seconds`."""
        if not self.available:
            return
        await asyncio.gather(
            *(s.wait_connected(s.cfg.connect_timeout_seconds + 1) for s in self.servers.values())
        )

    def tools(self) -> list[Tool]:
        out: list[Tool] = []
        for srv in self.servers.values():
            out += srv.chela_tools()
        return out

    def statuses(self) -> list[ServerStatus]:
        return [s.status for s in self.servers.values()]


def default_log_dir(cfg) -> Path:
    return cfg.agent.state_dir / "logs"
