"""Outbound HTTP goes through bot.net (SPEC §9.5 "URLs", ARCHITECTURE.md ``net/``).

Every .py file under bot/ and channels/ is parsed; a file that builds an outbound HTTP client or
opens a socket to somewhere (an aiohttp ``ClientSession`` or connector, ``aiohttp.request``,
httpx, requests, urllib3, ``urllib.request``, ``http.client``, ``socket.create_connection``,
``asyncio.open_connection`` ...) must be on ``ALLOWED`` with the reason it may.  A URL that the
model, an API client or a message chose is fetched with ``bot.net.fetch_url`` and nothing else,
so a new file that constructs a ClientSession fails here.

Ratchet: ALLOWED may only shrink.  Adding a file to it needs the reason to be "talks only to an
endpoint the owner configured", never "fetches a URL it was given"."""

from __future__ import annotations

import ast
import functools

import pytest
from tests.architecture import tree


# file -> why it may open outbound connections itself.  MAY ONLY SHRINK.
ALLOWED: dict[str, str] = {
    "bot/net/fetch.py": "the guarded fetch itself, and endpoint_session for configured endpoints",
    "bot/net/proxy.py": "the browser's guarded proxy: dials only the addresses bot.net.guard checked",
    "bot/cli/doctor.py": "`chela doctor` probes the channel APIs and model endpoints in the config",
    "bot/mcp/client.py": "MCP over HTTP, to the server URL the owner configured (§9.5 excepts it)",
    "channels/discord/media.py": "attachment downloads from the Discord API's own message payloads",
    "channels/signal/rpc.py": "JSON-RPC to the configured signal-cli daemon",
    "channels/slack/adapter.py": "file downloads from Slack hosts only, with the bot token",
    "channels/telegram/request.py": "python-telegram-bot's transport to the configured Bot API",
    "channels/whatsapp/transport/agent_platform.py": (
        "the configured Agent Platform API only (media downloads: the app's bot.net fetch)"
    ),
}

# call names (the last part of a dotted name, or the whole dotted name) that open a connection
CONSTRUCTORS = frozenset(
    {
        "ClientSession",
        "TCPConnector",
        "UnixConnector",
        "NamedPipeConnector",
        "aiohttp.request",
        "create_connection",
        "open_connection",
        "open_unix_connection",
        "create_unix_connection",
        "create_datagram_endpoint",
        "urlopen",
        "HTTPConnection",
        "HTTPSConnection",
        "AsyncClient",
        "httpx.Client",
        "httpx2.Client",
        "socket.socket",
        "PoolManager",
    }
)
# modules whose import alone means an HTTP client in this file
CLIENT_MODULES = frozenset(
    {"httpx", "httpx2", "requests", "urllib3", "http.client", "urllib.request", "pycurl"}
)


def _is_client_module(name: str) -> bool:
    return any(name == m or name.startswith(m + ".") for m in CLIENT_MODULES)


def outbound_uses(source: str) -> list[str]:
    """What in ``source`` builds an outbound client (empty when nothing does)."""
    found: list[str] = []
    for node in tree.walk(source):
        if isinstance(node, ast.Import):
            found += [f"import {a.name}" for a in node.names if _is_client_module(a.name)]
        elif isinstance(node, ast.ImportFrom) and node.module:
            if _is_client_module(node.module):
                found.append(f"from {node.module} import")
            elif node.module.startswith("aiohttp"):
                found += [
                    f"from {node.module} import {a.name}"
                    for a in node.names
                    if a.name in CONSTRUCTORS or f"aiohttp.{a.name}" in CONSTRUCTORS
                ]
        elif isinstance(node, ast.Call):
            name = tree.dotted(node.func)
            if name in CONSTRUCTORS or name.rsplit(".", 1)[-1] in CONSTRUCTORS:
                found.append(f"{name}(")
    return found


@functools.cache  # one scan per session: three tests read it, none changes it
def scan() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for p in tree.product_files():
        uses = outbound_uses(p.read_text(encoding="utf-8"))
        if uses:
            out[str(p.relative_to(tree.ROOT))] = uses
    return out


def test_no_outbound_http_client_outside_the_allow_list():
    stray = {f: uses for f, uses in scan().items() if f not in ALLOWED}
    assert not stray, (
        "these files open outbound HTTP connections themselves; a URL someone else chose is "
        f"fetched with bot.net.fetch_url, a configured endpoint with bot.net: {stray}"
    )


def test_the_allow_list_only_shrinks():
    """An entry whose file no longer opens connections must leave the list."""
    found = scan()
    stale = [f for f in ALLOWED if f not in found]
    assert not stale, f"remove from ALLOWED (they no longer open connections): {stale}"


def test_the_url_takers_are_not_on_the_list():
    for f in ("bot/agent/tools/web.py", "bot/media/remote.py", "bot/media/intake.py"):
        assert f not in ALLOWED and f not in scan()


@pytest.mark.parametrize(
    "snippet",
    [
        "import aiohttp\nasync def f(u):\n    async with aiohttp.ClientSession() as s:\n"
        "        return await (await s.get(u)).read()\n",
        "from aiohttp import ClientSession\ns = ClientSession()\n",
        "from aiohttp import ClientSession as CS\n",
        "import aiohttp\nc = aiohttp.TCPConnector(ssl=False)\n",
        "import aiohttp\nasync def f(u):\n    return await aiohttp.request('GET', u)\n",
        "import httpx\nhttpx.get('http://x')\n",
        "import requests\n",
        "from urllib.request import urlopen\n",
        "import urllib.request\nurllib.request.urlopen('http://x')\n",
        "import http.client\n",
        "import socket\nsocket.create_connection(('x', 80))\n",
        "import asyncio\nasync def f():\n    await asyncio.open_connection('x', 80)\n",
    ],
)
def test_the_scanner_sees_a_new_client(snippet):
    assert outbound_uses(snippet)


@pytest.mark.parametrize(
    "snippet",
    [
        "from aiohttp import web\napp = web.Application()\n",  # a server, not a client
        "from bot import net\nasync def f(u, r, l):\n    return await net.fetch_url(u, r, l)\n",
        "self.requests.append(1)\n",
    ],
)
def test_twin_the_scanner_passes_servers_and_the_guarded_fetch(snippet):
    assert outbound_uses(snippet) == []
