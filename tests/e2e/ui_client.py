"""Wire helpers for the Control UI's tests (SPEC §16.7): a real daemon with the HTTP channel
and the UI on, a login code minted the way ``chela dashboard`` mints it, and a client that
logs in with ``POST /ui/api/login`` and then sends ``Origin`` and ``X-Chela-CSRF`` on every
request (the cookie by hand, so a test can also replay it alone).

    async with ui_daemon(tmp_path, llm) as ui:
        async with await ui.login() as client:
            r = await client.get("/ui/api/bootstrap")
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from bot.app.daemon import Daemon
from bot.cli.dashboard import login_url
from bot.config import Config
from tests.e2e.harness import deep_merge, make_config, running

COOKIE = "chela_ui"
CSRF_HEADER = "X-Chela-CSRF"


def mint_code(cfg: Config) -> str:
    """A login code, exactly as ``chela dashboard`` makes it (into the state database)."""
    return login_url(cfg).split("#login=", 1)[1]


class UiClient:
    """An aiohttp session that speaks to one daemon as the owner's browser does: ``Origin``
    (the UI's own, by default) and, once logged in, the cookie and ``X-Chela-CSRF`` on every
    request.  ``headers=`` on a call adds or overrides (``None`` removes) a header."""

    def __init__(self, base: str, *, origin: str | None = None) -> None:
        self.base = base
        self.origin = origin if origin is not None else base
        self.cookie = ""
        self.csrf = ""
        self.http = aiohttp.ClientSession(cookie_jar=aiohttp.DummyCookieJar())

    async def __aenter__(self) -> UiClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self.http.close()

    def headers(self, extra: dict[str, str | None] | None = None) -> dict[str, str]:
        out: dict[str, str | None] = {"Origin": self.origin}
        if self.cookie:
            out["Cookie"] = f"{COOKIE}={self.cookie}"
        if self.csrf:
            out[CSRF_HEADER] = self.csrf
        out.update(extra or {})
        return {k: v for k, v in out.items() if v is not None}

    async def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        headers: dict[str, str | None] | None = None,
        **kw: Any,
    ) -> aiohttp.ClientResponse:
        """The response, body read (``await r.json()`` / ``r.text()`` still work)."""
        async with self.http.request(
            method,
            self.base + path,
            json=json,
            headers=self.headers(headers),
            allow_redirects=False,
            **kw,
        ) as r:
            await r.read()
            return r

    async def get(self, path: str, **kw: Any) -> aiohttp.ClientResponse:
        return await self.request("GET", path, **kw)

    async def post(self, path: str, json: Any = None, **kw: Any) -> aiohttp.ClientResponse:
        return await self.request("POST", path, json={} if json is None else json, **kw)

    async def delete(self, path: str, **kw: Any) -> aiohttp.ClientResponse:
        return await self.request("DELETE", path, **kw)

    async def login(self, code: str) -> aiohttp.ClientResponse:
        """``POST /ui/api/login``; on 200 the client keeps the cookie and the CSRF token."""
        r = await self.request("POST", "/ui/api/login", json={"code": code})
        if r.status == 200:
            self.csrf = (await r.json())["csrf"]
            self.cookie = r.cookies[COOKIE].value
        return r


@dataclass
class UiDaemon:
    daemon: Daemon
    cfg: Config
    base: str  # http://127.0.0.1:<port>

    @property
    def port(self) -> int:
        return int(self.base.rsplit(":", 1)[1])

    def client(self, *, origin: str | None = None) -> UiClient:
        """A client not logged in (no cookie, no token)."""
        return UiClient(self.base, origin=origin)

    async def login(self) -> UiClient:
        """A client logged in with a fresh code (close it, or use ``async with``)."""
        client = UiClient(self.base)
        r = await client.login(mint_code(self.cfg))
        if r.status != 200:
            await client.close()
            raise AssertionError(f"login failed: {r.status} {await r.text()}")
        return client

    @property
    def http_token(self) -> str:
        """The /v1 bearer token the daemon generated (not a UI credential)."""
        return self.cfg.http_token_path.read_text().strip()

    @property
    def log_file(self) -> Path:
        return self.cfg.agent.state_dir / "logs" / "chela.log"


def ui_config(tmp_path: Path, llm: Any, *, listen: str = "127.0.0.1:0", **sections: Any) -> Config:
    """A test config with ``[channels.http]`` on (a free port by default) and ``[ui]`` on."""
    http = {"enabled": True, "listen": listen}
    extra = deep_merge({"channels": {"http": http}}, sections)
    return make_config(tmp_path, llm, **extra)


@contextlib.asynccontextmanager
async def ui_daemon(
    tmp_path: Path, llm: Any, *, cfg: Config | None = None, **sections: Any
) -> AsyncIterator[UiDaemon]:
    """The real daemon (``tests.e2e.running``) serving the UI; ``sections`` merge into the
    config (e.g. ``ui={"read_only": True}``)."""
    cfg = cfg or ui_config(tmp_path, llm, **sections)
    async with running(cfg) as d:
        port = d.channels["http"].bound_port  # type: ignore[attr-defined]
        yield UiDaemon(d, cfg, f"http://127.0.0.1:{port}")
