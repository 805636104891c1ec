"""The door of every ``/ui/`` request, before any route runs, in this order:

1. ``Host`` is loopback, the listen host (any port) or ``public_origin``'s host (DNS rebinding)
2. an ``Origin``, when present, is the UI's own: ``http://<Host>`` or ``public_origin``
3. a state-changing request and the event stream carry an ``Origin``
4. ``/ui/api/*`` but login: a live ``chela_ui`` session cookie
5. ``/ui/api/*`` but login, reads included: ``X-Chela-CSRF`` is the session's token
6. a body is ``application/json`` (``multipart/form-data`` for uploads) within the caps
7. ``ui.read_only``: every write but login and logout is refused

No source address earns anything: loopback gets what it presents, nothing more.  Besides:
``OPTIONS`` and WebSocket upgrades are refused (no CORS, no sockets), every answer carries the
security headers (static files too) and API answers ``Cache-Control: no-store``.  One access
line per request names the path without its query, never a header.
"""

from __future__ import annotations

import hmac
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from aiohttp import web

from bot.store.ui import UiSession, digest
from bot.ui.errors import method_not_allowed, ui_error
from channels.util import host_of, is_loopback

if TYPE_CHECKING:
    from bot.store import Store

log = logging.getLogger("chela.ui")

COOKIE = "chela_ui"
CSRF_HEADER = "X-Chela-CSRF"
API = "/ui/api/"
LOGIN = "/ui/api/login"
LOGOUT = "/ui/api/logout"
EVENTS = "/ui/api/events"
UPLOADS = "/ui/api/uploads"
READS = frozenset({"GET", "HEAD"})
JSON_MAX = 1024 * 1024  # a JSON body (a chat message, a decision) is at most 1 MiB
MULTIPART_SLACK = 64 * 1024  # the form's own bytes around an upload

# request[SESSION_KEY]: the browser session the guard found (every /ui/api/ route but login)
SESSION_KEY = web.RequestKey("ui_session", UiSession)


@dataclass(frozen=True)
class Liveness:
    """Asks again whether the session a request came in with is still live."""

    store: Store
    cookie: str
    idle: float
    max_age: float

    def __call__(self) -> bool:
        found = self.store.ui_session(self.cookie, idle=self.idle, max_age=self.max_age)
        return found is not None


# request[LIVE_KEY]: set with SESSION_KEY (a stream asks it before each write)
LIVE_KEY = web.RequestKey("ui_session_live", Liveness)
# request[BODY_KEY]: a JSON body, read (capped) by the guard
BODY_KEY = web.RequestKey("ui_json_body", bytes)
# chela_ui values of one Cookie header looked up, at most: a page on another local port can
# set a shadow one for each prefix of a deep API path (/ui/, /ui/api, /ui/api/, …), which the
# browser sends before the real one (path /ui); an 8 KiB header holds hundreds
COOKIES_TRIED = 32

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; "
    "connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'"
)
HEADERS = {
    "Content-Security-Policy": CSP,
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
}

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
Refusal = web.StreamResponse | None


@dataclass(frozen=True)
class GuardSettings:
    listen_host: str  # channels.http.listen's host, lower case, no brackets
    public_origin: str  # "" or "scheme://host[:port]", lower case
    public_host: str  # public_origin's host
    read_only: bool
    idle: float  # ui.session_idle in seconds
    max_age: float  # ui.session_max in seconds
    upload_max: int  # media.max_download_mb in bytes


class Guard:
    def __init__(self, settings: GuardSettings, store: Store) -> None:
        self.s = settings
        self.store = store

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        t0 = time.perf_counter()
        response = self.refusal(request)
        if response is None:
            try:
                if _has_body(request) and not _is_upload(request):
                    await read_json_body(request)  # capped, whatever the route reads
                response = await handler(request)
            except web.HTTPException as e:
                response = _from_http_exception(request, e)
        _access_line(request, response.status, t0)
        return response

    def refusal(self, request: web.Request) -> Refusal:
        """The answer that refuses ``request``, or None when its route may run."""
        for rule in (
            self._host,
            _bare_prefix,
            _no_cors,
            self._origin,
            _origin_required,
            self._session,
            self._csrf,
            _unrouted,
            self._body,
            self._read_only,
        ):
            refused = rule(request)
            if refused is not None:
                return refused
        return None

    # 1 -------------------------------------------------------------------- Host
    def _host(self, request: web.Request) -> Refusal:
        host = host_of(request.headers.get("Host", ""))
        if host and (
            is_loopback(host)
            or host == self.s.listen_host
            or (self.s.public_host and host == self.s.public_host)
        ):
            return None
        return ui_error(
            403, "forbidden_host", "this Host is not the Control UI's; open the dashboard link"
        )

    # 2 ------------------------------------------------------------------ Origin
    def _origin(self, request: web.Request) -> Refusal:
        origin = request.headers.get("Origin")
        if origin is None or same_origin(origin, self.own_origins(request)):
            return None
        return ui_error(403, "forbidden_origin", "requests from another origin are refused")

    def own_origins(self, request: web.Request) -> list[str]:
        own = [f"http://{request.headers.get('Host', '')}"]
        if self.s.public_origin:
            own.append(self.s.public_origin)
        return own

    # 4 ----------------------------------------------------------------- session
    def _session(self, request: web.Request) -> Refusal:
        if not _needs_session(request):
            return None
        live = [
            (cookie, found)
            for cookie in cookie_values(request)
            if (found := self.store.ui_session(cookie, idle=self.s.idle, max_age=self.s.max_age))
        ]
        if not live:
            return ui_error(
                401, "unauthenticated", "no valid session: run `chela dashboard` to log in"
            )
        token = request.headers.get(CSRF_HEADER, "")
        cookie, found = next((x for x in live if _csrf_ok(token, x[1])), live[0])
        request[SESSION_KEY] = found
        request[LIVE_KEY] = Liveness(self.store, cookie, self.s.idle, self.s.max_age)
        return None

    # 5 -------------------------------------------------------------------- CSRF
    def _csrf(self, request: web.Request) -> Refusal:
        if not _needs_session(request):
            return None
        if _csrf_ok(request.headers.get(CSRF_HEADER, ""), request[SESSION_KEY]):
            return None
        return ui_error(403, "csrf", f"the {CSRF_HEADER} header is missing or wrong")

    # 6 -------------------------------------------------------------------- body
    def _body(self, request: web.Request) -> Refusal:
        if not _has_body(request):
            return None
        upload = _is_upload(request)
        wanted = "multipart/form-data" if upload else "application/json"
        if request.content_type.lower() != wanted:
            return ui_error(415, "unsupported_media_type", f"send Content-Type: {wanted}")
        cap = self.s.upload_max + MULTIPART_SLACK if upload else JSON_MAX
        if request.content_length is not None and request.content_length > cap:
            return ui_error(413, "too_large", f"the body is over {cap} bytes")
        return None

    # 7 --------------------------------------------------------------- read only
    def _read_only(self, request: web.Request) -> Refusal:
        if not self.s.read_only or request.method in READS:
            return None
        if request.path in (LOGIN, LOGOUT, EVENTS):
            return None
        return ui_error(403, "read_only", "this Control UI is read-only (ui.read_only)")


def cookie_values(request: web.Request) -> list[str]:
    """Every ``chela_ui`` value of the raw ``Cookie`` header, in order (at most
    ``COOKIES_TRIED``).  Not ``request.cookies``, which keeps only the last one: a page on
    another local port may set a shadow ``chela_ui`` (path ``/``) that the browser sends
    after the real one, and that shadow must not log the owner out."""
    values: list[str] = []
    for header in request.headers.getall("Cookie", []):
        for part in header.split(";"):
            name, sep, value = part.partition("=")
            value = value.strip().strip('"')
            if sep and name.strip() == COOKIE and value and value not in values:
                values.append(value)
    return values[:COOKIES_TRIED]


async def read_json_body(request: web.Request, cap: int = JSON_MAX) -> bytes:
    """The raw body of a JSON route, read at most ``cap`` bytes in: one over it is refused
    413 ``too_large``, whether or not it said its length (a chunked body has no
    ``Content-Length`` for the guard to check, and ``request.read`` would take it up to the
    HTTP channel's far larger limit).  The guard reads it before any route runs (a route
    that reads no body would otherwise leave a huge one unchecked); the route gets it
    again from the request."""
    kept = request.get(BODY_KEY)
    if kept is not None:
        return kept
    chunks: list[bytes] = []
    size = 0
    while chunk := await request.content.read(64 * 1024):
        size += len(chunk)
        if size > cap:
            raise web.HTTPRequestEntityTooLarge(max_size=cap, actual_size=size)
        chunks.append(chunk)
    request[BODY_KEY] = raw = b"".join(chunks)
    return raw


def session_live(request: web.Request) -> bool:
    """The session the guard let ``request`` in with has not ended since (asked by a stream
    before each write: logout, Revoke, ``--revoke-all`` and expiry end it)."""
    check = request.get(LIVE_KEY)
    return check is not None and check()


def _csrf_ok(token: str, session: UiSession) -> bool:
    return bool(token) and hmac.compare_digest(digest(token), session.csrf_hash)


def _bare_prefix(request: web.Request) -> Refusal:
    """``/ui`` (no slash) is the page at ``/ui/``."""
    if request.path == "/ui" and request.method in READS:
        return web.Response(status=308, headers={"Location": "/ui/"})
    return None


def _no_cors(request: web.Request) -> Refusal:
    """No preflight is ever granted, and no WebSocket route exists."""
    if request.method == "OPTIONS":
        return ui_error(403, "forbidden_origin", "cross-origin requests are not allowed")
    if "websocket" in request.headers.get("Upgrade", "").lower():
        return ui_error(403, "forbidden_origin", "the Control UI has no WebSocket route")
    return None


def _origin_required(request: web.Request) -> Refusal:
    """3: a write (the event stream, a POST, included) must say where it comes from."""
    if request.method in READS:
        return None
    if "Origin" in request.headers:
        return None
    return ui_error(403, "forbidden_origin", "a request that changes state must carry Origin")


def _needs_session(request: web.Request) -> bool:
    if not request.path.startswith(API):
        return False
    return not (request.path == LOGIN and request.method == "POST")


def _unrouted(request: web.Request) -> Refusal:
    """No route: 405 with ``Allow`` for a known path, 404 otherwise (after the session
    rules, so an unknown API path tells nothing to a caller without a session)."""
    route_error = request.match_info.http_exception
    if isinstance(route_error, web.HTTPMethodNotAllowed):
        return method_not_allowed(request.method, request.path, list(route_error.allowed_methods))
    if route_error is not None:
        return ui_error(404, "not_found", f"nothing at {request.path}")
    return None


def _is_upload(request: web.Request) -> bool:
    return request.path == UPLOADS and request.method == "POST"


def _has_body(request: web.Request) -> bool:
    if request.method in READS:
        return False
    length = request.content_length
    return bool(length) or (length is None and request.body_exists)


def _from_http_exception(request: web.Request, e: web.HTTPException) -> web.StreamResponse:
    if e.status < 400:
        raise e
    if isinstance(e, web.HTTPRequestEntityTooLarge):
        return ui_error(413, "too_large", "the body is too large")
    if isinstance(e, web.HTTPMethodNotAllowed):
        return method_not_allowed(request.method, request.path, list(e.allowed_methods))
    code = {400: "bad_request", 404: "not_found", 409: "conflict"}.get(e.status, "bad_request")
    return ui_error(e.status, code, e.reason)


def _access_line(request: web.Request, status: int, t0: float) -> None:
    """``path`` has no query (and a fragment never reaches the server); no header is named."""
    level = logging.INFO if status >= 400 else logging.DEBUG
    log.log(
        level,
        "ui %s %s -> %d (%.0f ms)",
        request.method,
        request.path,
        status,
        (time.perf_counter() - t0) * 1000,
    )


async def add_headers(request: web.Request, response: web.StreamResponse) -> None:
    """``on_response_prepare``: every ``/ui/`` answer, static files and errors included."""
    response.headers.update(HEADERS)
    if request.path.startswith(API):
        response.headers["Cache-Control"] = "no-store"


def same_origin(origin: str, own: list[str]) -> bool:
    """Scheme, host and port compared (default ports filled in)."""
    got = origin_parts(origin)
    return got is not None and any(got == origin_parts(o) for o in own)


def origin_parts(origin: str) -> tuple[str, str, int] | None:
    scheme, sep, rest = origin.strip().lower().partition("://")
    if not sep or scheme not in ("http", "https") or "/" in rest.rstrip("/"):
        return None
    rest = rest.rstrip("/")
    host = host_of(rest)
    if not host:
        return None
    port_text = rest.rsplit("]", 1)[-1] if rest.startswith("[") else rest
    _, colon, port = port_text.rpartition(":")
    return scheme, host, int(port) if colon else (443 if scheme == "https" else 80)
