"""``chela mcp list`` and ``chela mcp test NAME``: connect to the configured MCP servers
from this process and show their state and tools."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys

from bot.cli.common import add_common, load


def add_parser(sub) -> None:
    sp = add_common(
        sub.add_parser("mcp", help="MCP servers: list them with their state and tools, or test one")
    )
    sp.add_argument("action", choices=["list", "test"], help="list every server, or test one")
    sp.add_argument("name", nargs="?", help="with test: the server's name")
    sp.add_argument(
        "--timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help="how long to wait for each server to connect (default: its connect_timeout_seconds)",
    )
    sp.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    cfg = load(args)
    servers = list(cfg.mcp.servers)
    if args.action == "test":
        if not args.name:
            print("chela mcp test: name a server (see `chela mcp list`)", file=sys.stderr)
            return 2
        servers = [s for s in servers if s.name == args.name]
        if not servers:
            known = ", ".join(s.name for s in cfg.mcp.servers) or "none configured"
            print(
                f"chela mcp test: no server named {args.name!r} (servers: {known})", file=sys.stderr
            )
            return 1
    elif not servers:
        print("no MCP servers configured (add [[mcp.servers]] entries to the config)")
        return 0
    return asyncio.run(_run(cfg, servers, args))


async def _run(cfg, servers, args) -> int:
    from bot.mcp.client import McpManager, SDK_MISSING, default_log_dir

    mgr = McpManager(servers, log_dir=default_log_dir(cfg))
    if not mgr.available:
        print(f"chela mcp: {SDK_MISSING}", file=sys.stderr)
        return 1
    for s in servers:
        if not s.enabled:
            print(f"{s.name}: disabled")
    mgr.start()
    try:
        waits = [
            srv.wait_connected(args.timeout or srv.cfg.connect_timeout_seconds + 1)
            for srv in mgr.servers.values()
        ]
        await asyncio.gather(*waits)
        ok = True
        for srv in mgr.servers.values():
            st = srv.status
            where = srv.cfg.url or " ".join([srv.cfg.command, *srv.cfg.args])
            state = (
                "connected"
                if srv.session is not None
                else (st.state if st.error else "not connected (timed out)")
            )
            _print_server(st, where, state)
            ok = ok and srv.session is not None
            for t in st.tools:
                print(f"  {t.name}: {t.description}")
                if args.action == "test":
                    print("    " + json.dumps(t.schema, sort_keys=True))
        return 0 if ok or args.action == "list" else 1
    finally:
        await mgr.stop()


def _print_server(st, where: str, state: str) -> None:
    """The server's line; what it wrote on stderr before failing and the tool names in
    enabled/disabled_tools that match nothing on lines of their own."""
    from bot.mcp.diagnose import STDERR_MARK

    error = st.error.split(STDERR_MARK)[0] if st.stderr_tail else st.error
    print(f"{st.name} [{st.transport}] {where}: {state}" + (f" - {error}" if error else ""))
    if st.stderr_tail:
        print(f"  the server wrote on stderr (last {len(st.stderr_tail)} line(s)):")
        for line in st.stderr_tail:
            print(f"    | {line}")
    for warning in st.warnings:
        print(f"  warning: {warning}")
