"""The browser's proxy (bot/net/proxy.py): every request held to bot/net's URL rule.

Real clients (aiohttp through ``proxy=``, raw CONNECT over a socket) against small servers on
127.0.0.x that count what reaches them.  127.0.0.2 plays the "allowed" host (listed in
``allow_private_hosts``, the twin of each refusal); 127.0.0.1 is the secret that must see
nothing."""

from __future__ import annotations

import asyncio
import os
import socket

import aiohttp
import pytest
from aiohttp import web

from bot.net import FetchError, HostRules
from bot.net.proxy import GuardProxy, HostPatterns
from tests.fakes.dns import WildcardDNS


class Site:
    def __init__(self, host: str) -> None:
        self.host = host
        self.hits: list[str] = []
        self.port = 0
        self.runner: web.AppRunner | None = None

    async def start(self) -> Site:
        async def any_path(request: web.Request) -> web.Response:
            self.hits.append(request.path_qs)
            return web.Response(text=f"hello from {self.host}{request.path_qs}")

        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", any_path)
        self.runner = web.AppRunner(app, access_log=None)
        await self.runner.setup()
        site = web.TCPSite(self.runner, self.host, 0)
        await site.start()
        self.port = self.runner.addresses[0][1]
        return self

    async def close(self) -> None:
        assert self.runner is not None
        await self.runner.cleanup()


@pytest.fixture
async def secret():
    s = await Site("127.0.0.1").start()
    yield s
    await s.close()


@pytest.fixture
async def allowed():
    s = await Site("127.0.0.2").start()
    yield s
    await s.close()


async def get(proxy: GuardProxy, url: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as http:
        async with http.get(url, proxy=f"http://127.0.0.1:{proxy.port}") as r:
            return r.status, await r.text()


async def connect(proxy: GuardProxy, target: str, path: str = "/") -> bytes:
    """A raw CONNECT, then one plain HTTP request through the tunnel."""
    reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
    writer.write(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
    head = await reader.readuntil(b"\r\n\r\n")
    if b" 200 " in head.split(b"\r\n")[0]:
        writer.write(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
    out = head + await reader.read()
    writer.close()
    return out


async def test_http_to_loopback_is_refused_and_says_why(secret, allowed):
    async with GuardProxy(HostRules(["127.0.0.2"])) as proxy:
        status, text = await get(proxy, f"http://127.0.0.1:{secret.port}/admin")
        assert status == 403
        assert "loopback" in text
        assert secret.hits == []
        assert proxy.refusals[-1].host == "127.0.0.1"
        # twin: an allowed host is proxied, request line rewritten to origin form
        status, text = await get(proxy, f"http://127.0.0.2:{allowed.port}/page?q=1")
        assert (status, text) == (200, "hello from 127.0.0.2/page?q=1")
        assert allowed.hits == ["/page?q=1"]


async def test_connect_to_loopback_is_refused_twin_tunnels(secret, allowed):
    async with GuardProxy(HostRules(["127.0.0.2"])) as proxy:
        out = await connect(proxy, f"127.0.0.1:{secret.port}")
        assert out.startswith(b"HTTP/1.1 403")
        assert secret.hits == []
        out = await connect(proxy, f"127.0.0.2:{allowed.port}", "/tunnel")
        assert out.startswith(b"HTTP/1.1 200 Connection established")
        assert b"hello from 127.0.0.2/tunnel" in out


@pytest.mark.parametrize(
    "target",
    [
        "localhost",
        "[::1]",
        "169.254.169.254",  # metadata: even when listed
        "0x7f.1",  # another spelling of 127.0.0.1 the client never dials
        "2130706433",  # 127.0.0.1 as one decimal number
        "017700000001",  # ... in octal
        "0x7f000001",  # ... in hex
        "127.1",
        "127.0.0.1.",
        "[::ffff:127.0.0.1]",  # IPv4-mapped IPv6
        "[::ffff:7f00:1]",
        "[64:ff9b::7f00:1]",  # NAT64
        "0.0.0.0",
        "[::]",
        "LOCALHOST.",
        "10.0.0.1",
        "100.64.0.1",  # CGNAT
    ],
)
async def test_internal_targets_refused(target, secret):
    rules = HostRules(["169.254.169.254", "127.0.0.2"])
    async with GuardProxy(rules) as proxy:
        out = await connect(proxy, f"{target}:{secret.port}")
        assert out.startswith(b"HTTP/1.1 403"), out
        assert secret.hits == []


@pytest.mark.parametrize("scheme", ["ftp", "ws", "https"])
async def test_non_http_absolute_targets_refused(secret, scheme):
    """Only http is relayed without a tunnel (browsers send ws:// and https:// as CONNECT)."""
    async with GuardProxy(HostRules(["127.0.0.2"])) as proxy:
        reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
        writer.write(f"GET {scheme}://127.0.0.2/x HTTP/1.1\r\nHost: 127.0.0.2\r\n\r\n".encode())
        out = await reader.read()
        writer.close()
        assert out.startswith(b"HTTP/1.1 403")
        assert b"only http" in out


async def test_name_resolved_once_and_checked_address_dialled(monkeypatch, secret, allowed):
    """DNS rebinding: the first answer is checked and dialled; a later answer (127.0.0.1) is
    never used for that connection, and is refused when it is the answer."""
    answers = iter(["127.0.0.2", "127.0.0.1"])
    dns = WildcardDNS("127.0.0.2")
    real = dns.getaddrinfo

    def rebinding(host, port, *a, **kw):
        dns.answer = next(answers, "127.0.0.1")
        return real(host, port, *a, **kw)

    dns.install(monkeypatch)
    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    async with GuardProxy(HostRules(["127.0.0.2"])) as proxy:
        status, text = await get(proxy, f"http://rebind.test:{allowed.port}/one")
        assert (status, text) == (200, "hello from 127.0.0.2/one")
        assert dns.queries == ["rebind.test"]  # one lookup for the connection
        status, text = await get(proxy, f"http://rebind.test:{secret.port}/two")
        assert status == 403 and "127.0.0.1" in text
        assert secret.hits == []


async def test_host_patterns_are_read_as_hosts_are():
    """A pattern is compared in the form the proxy compares hosts (lower case, no trailing
    dot, IDNA): a deny written ``*.Bücher.de.`` still denies ``www.bücher.de``."""
    deny = HostPatterns(deny=["*.Bücher.de.", "Evil.Test."])
    for host in ("www.xn--bcher-kva.de", "evil.test"):
        with pytest.raises(FetchError):
            deny.check(host)
    deny.check("xn--bcher-kva.de")  # twin: the bare name is not a subdomain
    deny.check("good.test")
    HostPatterns(allow=["*.Bücher.de."]).check("www.xn--bcher-kva.de")


async def test_host_patterns():
    p = HostPatterns(allow=["*.example.com", "example.org"], deny=["bad.example.com"])
    p.check("www.example.com")
    p.check("example.org")
    for host in ("example.com", "bad.example.com", "example.net", "evil-example.com"):
        with pytest.raises(FetchError):
            p.check(host)
    HostPatterns().check("anything.example")  # [] allows every public host


async def test_patterns_refuse_before_any_lookup(monkeypatch, allowed):
    dns = WildcardDNS("127.0.0.2").install(monkeypatch)
    patterns = HostPatterns(deny=["blocked.test"])
    async with GuardProxy(HostRules(["127.0.0.2"]), patterns) as proxy:
        status, text = await get(proxy, f"http://blocked.test:{allowed.port}/")
        assert status == 403 and "deny_hosts" in text
        assert dns.queries == [] and allowed.hits == []
        status, _ = await get(proxy, f"http://fine.test:{allowed.port}/")
        assert status == 200


async def test_close_ends_open_tunnels(allowed, caplog):
    proxy = GuardProxy(HostRules(["127.0.0.2"]))
    await proxy.start()
    reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
    writer.write(f"CONNECT 127.0.0.2:{allowed.port} HTTP/1.1\r\n\r\n".encode())
    await reader.readuntil(b"\r\n\r\n")
    await asyncio.wait_for(proxy.close(), 5)
    assert await asyncio.wait_for(reader.read(), 5) == b""
    writer.close()
    await asyncio.sleep(0.05)
    assert not [r for r in caplog.records if r.levelname == "ERROR"]  # ended quietly


async def test_one_request_per_connection(secret, allowed):
    """A second request pipelined on the same connection -- for another host -- never reaches
    the first request's origin, nor its own; a body is relayed whole."""
    async with GuardProxy(HostRules(["127.0.0.2"])) as proxy:
        reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
        writer.write(
            f"POST http://127.0.0.2:{allowed.port}/one HTTP/1.1\r\nHost: 127.0.0.2\r\n"
            "Content-Length: 5\r\n\r\nhello"
            f"GET http://127.0.0.1:{secret.port}/two HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode()
        )
        out = await asyncio.wait_for(reader.read(), 10)
        writer.close()
        assert out.startswith(b"HTTP/1.1 200") and b"hello from 127.0.0.2/one" in out
        assert allowed.hits == ["/one"] and secret.hits == []


async def test_chunked_upload_refused(allowed):
    async with GuardProxy(HostRules(["127.0.0.2"])) as proxy:
        reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
        writer.write(
            f"POST http://127.0.0.2:{allowed.port}/up HTTP/1.1\r\nHost: x\r\n"
            "Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n".encode()
        )
        out = await asyncio.wait_for(reader.read(), 10)
        writer.close()
        assert out.startswith(b"HTTP/1.1 403") and allowed.hits == []


async def test_the_host_header_is_the_checked_host(secret, allowed):
    """An absolute request for the allowed host carrying another ``Host`` goes to the checked
    address with the checked host as its ``Host``; a CONNECT goes where its target says."""
    seen: list[str] = []

    async def show_host(request: web.Request) -> web.Response:
        seen.append(request.host)
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_get("/h", show_host)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.2", 0).start()
    port = runner.addresses[0][1]
    try:
        async with GuardProxy(HostRules(["127.0.0.2"])) as proxy:
            reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
            writer.write(
                f"GET http://127.0.0.2:{port}/h HTTP/1.1\r\n"
                f"Host: 127.0.0.1:{secret.port}\r\n\r\n".encode()
            )
            out = await asyncio.wait_for(reader.read(), 10)
            writer.close()
            assert out.startswith(b"HTTP/1.1 200")
            assert seen == [f"127.0.0.2:{port}"]
            reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
            writer.write(
                f"CONNECT 127.0.0.2:{allowed.port} HTTP/1.1\r\n"
                f"Host: 127.0.0.1:{secret.port}\r\n\r\n".encode()
            )
            await reader.readuntil(b"\r\n\r\n")
            writer.write(b"GET /via HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            out = await asyncio.wait_for(reader.read(), 10)
            writer.close()
            assert b"hello from 127.0.0.2/via" in out
            assert secret.hits == []
    finally:
        await runner.cleanup()


class Silent:
    """An origin that accepts, reads, never answers, and notes when its peer goes away."""

    def __init__(self) -> None:
        self.closed = asyncio.Event()
        self.accepted = asyncio.Event()

    async def start(self) -> int:
        async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            self.accepted.set()
            while await reader.read(65536):
                pass
            self.closed.set()
            writer.close()

        self.server = await asyncio.start_server(hold, "127.0.0.2", 0)
        return self.server.sockets[0].getsockname()[1]


@pytest.mark.parametrize("how", ["CONNECT", "GET"])
async def test_a_client_that_leaves_frees_its_origin_connection(how):
    """A page that never loads: when the browser gives up and closes its connection, the
    proxy lets go of the origin's too (nothing is held until the daemon ends)."""
    silent = Silent()
    port = await silent.start()
    async with GuardProxy(HostRules(["127.0.0.2"])) as proxy:
        reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
        if how == "CONNECT":
            writer.write(f"CONNECT 127.0.0.2:{port} HTTP/1.1\r\n\r\n".encode())
            await reader.readuntil(b"\r\n\r\n")
            writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        else:
            writer.write(f"GET http://127.0.0.2:{port}/ HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        await asyncio.wait_for(silent.accepted.wait(), 5)
        assert not silent.closed.is_set()
        writer.close()
        await asyncio.wait_for(silent.closed.wait(), 5)
    silent.server.close()


async def test_a_head_too_long_or_too_slow_ends_the_connection(monkeypatch, allowed):
    from bot.net import proxy as proxy_module

    monkeypatch.setattr(proxy_module, "HEAD_TIMEOUT", 0.5)
    async with GuardProxy(HostRules(["127.0.0.2"])) as proxy:
        reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
        writer.write(b"GET http://127.0.0.2/ HTTP/1.1\r\nX-Long: " + b"a" * 200_000)
        assert await asyncio.wait_for(reader.read(), 5) == b""
        writer.close()
        reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
        writer.write(b"GET http://127.0.0.2/ HTTP/1.1\r\n")  # and then nothing
        assert await asyncio.wait_for(reader.read(), 5) == b""
        writer.close()
        status, _ = await get(proxy, f"http://127.0.0.2:{allowed.port}/twin")
        assert status == 200 and allowed.hits == ["/twin"]


async def test_a_request_to_the_proxy_itself_goes_no_further(allowed):
    """The proxy's own port is loopback like any other; even with loopback allowed, it asks
    itself in origin form, which it refuses: one hop, no loop."""
    async with GuardProxy(HostRules(["127.0.0.2"])) as proxy:
        status, text = await get(proxy, f"http://127.0.0.1:{proxy.port}/loop")
        assert status == 403 and "127.0.0.1" in text
        status, _ = await get(proxy, f"http://127.0.0.2:{allowed.port}/twin")
        assert status == 200
    async with GuardProxy(HostRules(["127.0.0.1"])) as proxy:
        status, text = await asyncio.wait_for(get(proxy, f"http://127.0.0.1:{proxy.port}/x"), 10)
        assert status == 403 and "bad URL" in text


async def test_a_tunnel_the_client_left_is_let_go_when_the_origin_stays_silent(monkeypatch):
    """After the browser closes a tunnel, an origin that neither answers nor closes gets a
    short while (``TUNNEL_GRACE``) and then the proxy lets go of both connections."""
    from bot.net import proxy as proxy_module

    monkeypatch.setattr(proxy_module, "TUNNEL_GRACE", 0.3)
    stay = asyncio.Event()

    async def deaf(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while await reader.read(65536):
            stay.set()
        await asyncio.sleep(30)  # never answers, never closes

    origin = await asyncio.start_server(deaf, "127.0.0.2", 0)
    port = origin.sockets[0].getsockname()[1]

    def fds() -> int:
        return len(os.listdir("/proc/self/fd"))

    try:
        async with GuardProxy(HostRules(["127.0.0.2"])) as proxy:
            reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
            writer.write(f"CONNECT 127.0.0.2:{port} HTTP/1.1\r\n\r\n".encode())
            await reader.readuntil(b"\r\n\r\n")
            writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            await asyncio.wait_for(stay.wait(), 5)
            held = fds()  # the client's socket, the proxy's two, the origin's
            writer.close()
            for _ in range(50):
                if fds() <= held - 3:  # the client's and both of the proxy's are closed
                    break
                await asyncio.sleep(0.1)
            assert fds() <= held - 3
    finally:
        origin.close()
