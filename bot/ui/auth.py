"""Login, logout, bootstrap and the browser sessions.

A login code is minted by ``chela dashboard`` (:func:`mint_code`) into the state database
and traded once, by ``POST /ui/api/login``, for the two halves of a session: the HttpOnly
``chela_ui`` cookie and the CSRF token the page keeps and sends on every API request.  The
database keeps only their hashes.  Login attempts are limited per source address (loopback
included, and all of loopback is one source: being local earns nothing).
"""

from __future__ import annotations

import ipaddress
import json
import secrets
import time
from collections import deque
from typing import TYPE_CHECKING, Any

from aiohttp import web

from bot.ui.errors import ui_error
from bot.ui.guard import COOKIE, CSRF_HEADER, SESSION_KEY, read_json_body

if TYPE_CHECKING:
    from bot.store import Store
    from bot.ui.context import UiContext

LOGIN_ATTEMPTS = 5  # per source address
LOGIN_WINDOW = 60.0  # seconds
CODE_CHARS = 22  # 128 bits as base64url without padding
CODE_INVALID = "this login link was used or has expired; run `chela dashboard` again"


def mint_code(store: Store) -> str:
    """A new login code (128 random bits, base64url, 22 characters), kept as its hash."""
    code = secrets.token_urlsafe(16)
    store.add_login_code(code)
    return code


LOOPBACK = "loopback"  # the one rate-limit bucket of every loopback source address


def source_key(remote: str) -> str:
    """The rate-limit key of a source address: every loopback address (127.0.0.0/8, ``::1``,
    ``::ffff:127.x``) is one source, since any local process may bind any of them."""
    try:
        ip = ipaddress.ip_address(remote.split("%", 1)[0])
    except ValueError:
        return remote
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return LOOPBACK if ip.is_loopback else str(ip)


class RateLimit:
    """At most ``limit`` attempts per ``window`` seconds for one key (a source address)."""

    def __init__(self, limit: int = LOGIN_ATTEMPTS, window: float = LOGIN_WINDOW) -> None:
        self.limit = limit
        self.window = window
        self._seen: dict[str, deque[float]] = {}

    def allow(self, key: str, now: float | None = None) -> bool:
        now = time.monotonic() if now is None else now
        for k in [k for k, q in self._seen.items() if q and q[-1] <= now - self.window]:
            del self._seen[k]  # forget quiet addresses
        seen = self._seen.setdefault(key, deque())
        while seen and seen[0] <= now - self.window:
            seen.popleft()
        if len(seen) >= self.limit:
            return False
        seen.append(now)
        return True


class Auth:
    def __init__(self, ctx: UiContext) -> None:
        self.ctx = ctx
        self.limit = RateLimit()

    def register(self, app: web.Application) -> None:
        app.router.add_post("/api/login", self.login)
        app.router.add_post("/api/logout", self.logout)
        app.router.add_get("/api/bootstrap", self.bootstrap)
        app.router.add_get("/api/ui-sessions", self.sessions)
        app.router.add_delete("/api/ui-sessions/{id}", self.revoke)

    async def login(self, request: web.Request) -> web.Response:
        if not self.limit.allow(source_key(request.remote or "")):
            return ui_error(
                429, "rate_limited", "too many login attempts; wait a minute and try again"
            )
        code = await _code_field(request)
        if code is None:
            return ui_error(400, "bad_request", "code: a string is required")
        if len(code) != CODE_CHARS or not self.ctx.store.take_login_code(code):
            return ui_error(401, "login_code_invalid", CODE_INVALID)
        cookie, csrf = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
        self.ctx.store.add_ui_session(cookie, csrf, request.headers.get("User-Agent", ""))
        response = web.json_response({"csrf": csrf})
        ui = self.ctx.cfg.ui
        response.set_cookie(
            COOKIE,
            cookie,
            max_age=int(ui.max_seconds),
            path="/ui",
            httponly=True,
            samesite="Strict",
            secure=ui.secure or None,
        )
        return response

    async def logout(self, request: web.Request) -> web.Response:
        self.ctx.store.end_ui_session(request[SESSION_KEY].id)
        response = web.Response(status=204)
        response.del_cookie(COOKIE, path="/ui")  # Max-Age=0
        return response

    async def bootstrap(self, request: web.Request) -> web.Response:
        cfg = self.ctx.cfg
        from bot import __version__

        return web.json_response(
            {
                # the token this request carried, which the guard checked against its hash
                "csrf": request.headers[CSRF_HEADER],
                "version": __version__,
                "agent": {"id": cfg.agent.id, "name": cfg.agent.name},
                "main_session": f"agent:{cfg.agent.id}:main",
                "limits": {"max_upload_bytes": int(cfg.media.max_download_mb * 1024 * 1024)},
                "read_only": cfg.ui.read_only,
            }
        )

    async def sessions(self, request: web.Request) -> web.Response:
        ui = self.ctx.cfg.ui
        current = request[SESSION_KEY].id
        rows = self.ctx.store.ui_sessions(idle=ui.idle_seconds, max_age=ui.max_seconds)
        return web.json_response(
            {
                "sessions": [
                    {
                        "id": s.id,
                        "created": s.created,
                        "last_seen": s.last_seen,
                        "user_agent": s.user_agent,
                        "current": s.id == current,
                    }
                    for s in rows
                ]
            }
        )

    async def revoke(self, request: web.Request) -> web.Response:
        if not self.ctx.store.end_ui_session(request.match_info["id"]):
            return ui_error(404, "not_found", "no such browser session")
        return web.Response(status=204)


async def _code_field(request: web.Request) -> str | None:
    try:
        body: Any = json.loads(await read_json_body(request) or b"null")
    except (ValueError, RecursionError):
        return None
    code = body.get("code") if isinstance(body, dict) else None
    return code if isinstance(code, str) else None
