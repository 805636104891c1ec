"""A web site the URL rule treats as public, for the browser tool's end-to-end tests.

``namespace()`` puts the test's thread in a network namespace of its own (``unshare(CLONE_NEWNET)``,
restored afterwards) whose loopback also carries 45.77.1.10 -- a routable public address that
exists only there -- so a server on it is "the internet" to bot/net's rule while nothing leaves
the machine.  Everything the thread starts (the daemon's proxy, Playwright's driver, Chromium)
lives in that namespace too.  ``public_route`` lets this process connect to the public address
through the test-wide no-internet guard (tests/conftest.py).  ``Site`` serves pages and logs
every request: a "secret" one on 127.0.0.1 must end each attack with an empty log."""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import socket
import subprocess
from collections.abc import Iterator

import pytest
from aiohttp import web

PUBLIC = "45.77.1.10"
CLONE_NEWNET = 0x40000000
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


def skip_reason() -> str:
    try:
        import playwright  # noqa: F401
    except ImportError:
        return "playwright is not installed"
    if not os.access(CHROMIUM, os.X_OK):
        return "no chromium"
    if os.geteuid() != 0:
        return "network namespaces need root"
    return ""


@contextlib.contextmanager
def namespace() -> Iterator[None]:
    """This thread in a fresh network namespace with the public address on its loopback (a
    test module's ``netns`` fixture: ``with namespace(): yield``); skipped where it cannot be."""
    reason = skip_reason()
    if reason:
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    libc = ctypes.CDLL(None, use_errno=True)
    home = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    if libc.unshare(CLONE_NEWNET) != 0:
        os.close(home)
        pytest.skip(f"unshare(CLONE_NEWNET) failed: {os.strerror(ctypes.get_errno())}")
    try:
        subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
        subprocess.run(["ip", "addr", "add", f"{PUBLIC}/32", "dev", "lo"], check=True)
        yield
    finally:
        libc.setns(home, CLONE_NEWNET)
        os.close(home)


@contextlib.contextmanager
def public_route() -> Iterator[None]:
    """Connections to the public address pass the no-internet guard (it exists only in the
    namespace); every other address is judged by the guard as before."""
    import tests.conftest as no_internet

    guarded = socket.socket.connect

    def connect(sock, address):
        if isinstance(address, tuple) and address[0] == PUBLIC:
            return no_internet._real_connect(sock, address)
        return guarded(sock, address)

    mp = pytest.MonkeyPatch()
    mp.setattr(socket.socket, "connect", connect)
    try:
        yield
    finally:
        mp.undo()


class Site:
    """``pages`` (path -> HTML) on ``host``:80, every request's path logged in ``hits``."""

    def __init__(self, host: str, pages: dict[str, str]) -> None:
        self.host = host
        self.pages = pages
        self.hits: list[str] = []

    async def __aenter__(self) -> Site:
        async def any_path(request: web.Request) -> web.Response:
            self.hits.append(request.path_qs)
            html = self.pages.get(request.path, "<title>Other</title><p>ok</p>")
            return web.Response(text=html, content_type="text/html")

        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", any_path)
        self.runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.1)
        await self.runner.setup()
        await web.TCPSite(self.runner, self.host, 80).start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.runner.cleanup()
