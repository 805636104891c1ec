"""The HTTP API's door: only the owner may drive it.  Before any route runs,
``Guard.middleware`` refuses:

* a ``Host`` header that is neither loopback nor the configured listen host (DNS rebinding);
* an ``Origin`` header not listed in ``allowed_origins`` (a web page the owner has open),
  and answers CORS preflights only for listed origins;
* a missing or wrong bearer token (everything but ``/healthz``);
* a POST whose body is not ``Content-Type: application/json`` (a "simple" cross-site
  request needs no preflight, a JSON one does), or is larger than ``MAX_BODY``.
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable, Iterable

from aiohttp import web

from channels.http.responses import MAX_BODY, error, too_large, unauthorized
from channels.util import host_of, is_loopback

PREFLIGHT_MAX_AGE = 600
# request storage key: the allowed Origin this request came from (set by the guard)
CORS_KEY = web.RequestKey("cors_origin", str) if hasattr(web, "RequestKey") else "chela.cors_origin"
ROUTES_HINT = "POST /v1/chat/completions, GET /v1/models, GET /v1/models/{id} and GET /healthz"

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class Guard:
    def __init__(
        self,
        *,
        host: str,
        token: str,
        allowed_origins: Iterable[str],
        token_hint: str,
        base_url: Callable[[], str],
        mounted: Iterable[str] = (),
    ) -> None:
        self.host = host
        # prefixes of the sub-applications mounted beside the API: they keep their own door
        self.mounted = tuple(mounted)
        self.token = token
        self.allowed_origins = set(allowed_origins)
        self.token_hint = token_hint  # where the owner finds the token, for the 401 message
        self.base_url = base_url

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if self._mounted(request.path):
            return await handler(request)  # the sub-application's own guard decides
        try:
            refusal = self.refusal(request)
            if refusal is not None:
                return refusal
            return await handler(request)
        except web.HTTPRequestEntityTooLarge:
            return too_large()
        except web.HTTPException as e:
            if e.status < 400:
                raise
            return error(e.status, e.reason, "invalid_request_error")

    def refusal(self, request: web.Request) -> web.StreamResponse | None:
        """The response that refuses this request, or None when the route may run."""
        host = request.headers.get("Host", "")
        if not self._host_allowed(host):
            shown = f"the Host header {host!r} is" if host else "a request without a Host header is"
            return error(403, f"{shown} not allowed; use {self.base_url()}", "forbidden_host")
        origin = request.headers.get("Origin")
        if origin is not None:
            refused = self._origin_refusal(request, origin)
            if refused is not None:
                return refused
        if request.path == "/healthz" and request.match_info.http_exception is None:
            return None  # liveness needs no token
        if request.path == "/" and self.mounted and request.method in ("GET", "HEAD"):
            return None  # the redirect to the first mounted sub-application
        if not self._authorized(request):
            return self._unauthorized()
        refused = _route_refusal(request)
        return refused if refused is not None else _body_refusal(request)

    def _mounted(self, path: str) -> bool:
        return any(path == p or path.startswith(p + "/") for p in self.mounted)

    def _host_allowed(self, header: str) -> bool:
        host = host_of(header)
        if not host:
            return False
        return is_loopback(host) or host == self.host.lower().strip("[]")

    def _authorized(self, request: web.Request) -> bool:
        scheme, _, value = request.headers.get("Authorization", "").partition(" ")
        return (
            bool(self.token)
            and scheme.lower() == "bearer"
            and hmac.compare_digest(value.strip().encode(), self.token.encode())
        )

    def _unauthorized(self) -> web.Response:
        where = f" (the token is {self.token_hint})" if self.token_hint else ""
        return unauthorized(
            f"invalid or missing bearer token; send 'Authorization: Bearer <token>'{where}"
        )

    def _origin_refusal(self, request: web.Request, origin: str) -> web.StreamResponse | None:
        if norm_origin(origin) not in self.allowed_origins:
            return error(
                403,
                f"the origin {origin!r} is not allowed; add it to "
                "channels.http.allowed_origins to let that page call the API",
                "forbidden_origin",
            )
        request[CORS_KEY] = origin
        if request.method == "OPTIONS":
            return _preflight(request)
        return None


def _route_refusal(request: web.Request) -> web.StreamResponse | None:
    route_error = request.match_info.http_exception
    if isinstance(route_error, web.HTTPMethodNotAllowed):
        allowed = ", ".join(sorted(route_error.allowed_methods))
        resp = error(
            405,
            f"{request.method} is not allowed on {request.path}; use {allowed}",
            "method_not_allowed",
        )
        resp.headers["Allow"] = allowed
        return resp
    if route_error is not None:
        return error(
            404,
            f"no route {request.method} {request.path}; the API serves {ROUTES_HINT}",
            "not_found",
        )
    return None


def _body_refusal(request: web.Request) -> web.StreamResponse | None:
    if request.method != "POST":
        return None
    if request.content_type.lower() != "application/json":
        got = request.headers.get("Content-Type", "none")
        return error(
            415,
            f"the Content-Type {got!r} is not accepted; send Content-Type: application/json",
            "unsupported_media_type",
        )
    if request.content_length is not None and request.content_length > MAX_BODY:
        return too_large()
    return None


def _preflight(request: web.Request) -> web.Response:
    method = request.headers.get("Access-Control-Request-Method", "")
    allowed = sorted(_route_methods(request))
    if not allowed or (method and method.upper() not in allowed):
        return error(
            405,
            f"{method or 'this method'} is not allowed on {request.path}",
            "method_not_allowed",
        )
    return web.Response(
        status=204,
        headers={
            "Access-Control-Allow-Methods": ", ".join(allowed),
            "Access-Control-Allow-Headers": "Authorization, Content-Type",
            "Access-Control-Max-Age": str(PREFLIGHT_MAX_AGE),
        },
    )


def _route_methods(request: web.Request) -> set[str]:
    exc = request.match_info.http_exception
    if isinstance(exc, web.HTTPMethodNotAllowed):
        return {m for m in exc.allowed_methods if m != "HEAD"}
    if exc is not None:
        return set()
    return {request.match_info.route.method}


async def add_cors_headers(request: web.Request, response: web.StreamResponse) -> None:
    """CORS headers go only on answers to an origin the owner listed (set by the guard)."""
    origin = request.get(CORS_KEY)
    if origin:
        response.headers["Access-Control-Allow-Origin"] = origin
        response.headers["Vary"] = "Origin"


def norm_origin(origin: str) -> str:
    return origin.strip().rstrip("/").lower()
