"""A small MCP server for tests, written with the official SDK's high-level server
(``MCPServer`` in mcp 2.x, ``FastMCP`` in 1.x).

    python tests/mcp_server.py                    # stdio
    python tests/mcp_server.py --http PORT        # streamable HTTP on 127.0.0.1:PORT/mcp

Tools: ``add(a, b)``, ``echo(text)``, ``slow(seconds)``, ``whoami()`` (the env var
``MCP_TEST_LABEL``), ``fail(message)`` (a tool error).  ``--pidfile PATH`` writes the pid.
"""

from __future__ import annotations

import argparse
import asyncio
import os

try:
    from mcp.server.mcpserver import MCPServer as _Server
except ImportError:  # mcp 1.x
    from mcp.server.fastmcp import FastMCP as _Server  # type: ignore[no-redef]

server = _Server("chela-test")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def echo(text: str) -> str:
    """Echo the text back."""
    return text


@server.tool()
async def slow(seconds: float) -> str:
    """Sleep, then answer."""
    await asyncio.sleep(seconds)
    return f"slept {seconds}"


@server.tool()
def whoami() -> str:
    """The label this server was started with."""
    return (
        os.environ.get("MCP_TEST_LABEL", "(none)")
        + " secret-visible="
        + str("CHELA_SECRET_PROBE" in os.environ)
    )


@server.tool()
def fail(message: str) -> str:
    """Always fails."""
    raise ValueError(message)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--http", type=int, default=0)
    p.add_argument("--pidfile", default="")
    a = p.parse_args()
    if a.pidfile:
        with open(a.pidfile, "w") as f:
            f.write(str(os.getpid()))
    if a.http:
        server.run("streamable-http", host="127.0.0.1", port=a.http)
    else:
        server.run("stdio")


if __name__ == "__main__":
    main()
