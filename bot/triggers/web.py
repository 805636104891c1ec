"""``POST /hooks/<name>``: the aiohttp sub-application the HTTP channel mounts under
``/hooks``.  Its own door: the owner's API token is neither needed nor accepted here; the
hook's signature is the credential.  Order: route (404), rate (429), size (413), signature
(401), delivery id seen (200 duplicate), stored (202) — the event is in the database
before the 202 is written, and its turn runs after."""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from aiohttp import web

from bot.config.triggers import HookConfig
from bot.triggers.hooks import Key, Signed, body_text, shown_headers, verify

log = logging.getLogger("chela.hooks")

MAX_BODY = 1024 * 1024  # 1 MiB
RATE_LIMIT = 60  # requests a route takes in any 60 s
RATE_WINDOW = 60.0
PREFIX = "/hooks"


@dataclass
class Window:
    """A sliding window of request times, per route."""

    limit: int = RATE_LIMIT
    seconds: float = RATE_WINDOW
    times: dict[str, deque[float]] = field(default_factory=dict)

    def allow(self, route: str, now: float) -> bool:
        """Every request counts, refused ones too.  Only the newest ``limit`` times are
        kept: the route is open while fewer than ``limit`` of them are in the window."""
        q = self.times.setdefault(route, deque(maxlen=self.limit))
        while q and q[0] <= now - self.seconds:
            q.popleft()
        ok = len(q) < self.limit
        q.append(now)
        return ok


@dataclass(frozen=True)
class HookPorts:
    """What the sub-application reaches: the store's accept/refuse and the turn starter."""

    # (hook, delivery id, payload) -> event id, or None when the delivery id was seen
    accept: Callable[[str, str, dict], str | None]
    refuse: Callable[[str, str], None]  # (hook, verdict): a ledger row
    started: Callable[[str], None]  # an accepted event id: run its turn
    clock: Callable[[], float] = time.time


def _json(code: int, **body: str) -> web.Response:
    return web.json_response(body, status=code)


async def _read_capped(request: web.Request) -> bytes | None:
    """The body, or None when it is over ``MAX_BODY`` (read no further than that)."""
    if request.content_length is not None and request.content_length > MAX_BODY:
        return None
    chunks, size = [], 0
    async for chunk in request.content.iter_chunked(64 * 1024):
        size += len(chunk)
        if size > MAX_BODY:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


class HookRoutes:
    def __init__(
        self, hooks: Mapping[str, HookConfig], secrets: Mapping[str, str], ports: HookPorts
    ) -> None:
        self.hooks = dict(hooks)
        self.secrets = dict(secrets)  # hook name -> its secret (never logged)
        self.ports = ports
        self.window = Window()
        self.flooded: dict[str, float] = {}  # route -> when its last "rate limited" row was written

    async def post(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        hook = self.hooks.get(name)
        if hook is None:
            return _json(404, error="not found")
        ports = self.ports
        if not self.window.allow(name, ports.clock()):
            return self._limited(name, ports.clock())
        body = await _read_capped(request)
        if body is None:
            ports.refuse(name, "too large")
            log.info("hook %s: a body over %d bytes refused (413)", name, MAX_BODY)
            return _json(413, error="too large")
        headers = {k.lower(): v for k, v in request.headers.items()}
        key = Key(self.secrets.get(name, ""), hook.header.lower(), hook.tolerance_seconds)
        verdict = verify(hook.scheme, Signed(headers, body, ports.clock()), key)
        if not verdict.ok:
            ports.refuse(name, "unauthorized")
            log.info("hook %s: unauthorized (401)", name)
            return _json(401, error="unauthorized")
        payload = {
            "body": body_text(body),
            "event": verdict.event,
            "headers": shown_headers(request.headers, hook.header, key.secret),
        }
        event_id = ports.accept(name, verdict.delivery_id, payload)
        if event_id is None:
            log.info("hook %s: delivery %r already seen (duplicate)", name, verdict.delivery_id)
            return _json(200, status="duplicate")
        ports.started(event_id)
        return _json(202, id=event_id, status="accepted")

    def _limited(self, name: str, now: float) -> web.Response:
        """429; a flood is one ledger row and one log line a minute, not one per request
        (a sender that needs no signature to be refused must not fill the disk)."""
        if now - self.flooded.get(name, float("-inf")) >= RATE_WINDOW:
            self.flooded[name] = now
            self.ports.refuse(name, "rate limited")
            log.warning("hook %s: over %d requests a minute: refused (429)", name, RATE_LIMIT)
        return _json(429, error="rate limited")


def hooks_app(
    hooks: Mapping[str, HookConfig], secrets: Mapping[str, str], ports: HookPorts
) -> web.Application:
    """A fresh sub-application (one per HTTP channel start).  A larger limit than the hook's
    own lets its handler answer 413 itself."""
    routes = HookRoutes(hooks, secrets, ports)
    app = web.Application(client_max_size=MAX_BODY + 1)
    app.router.add_post("/{name}", routes.post)
    return app
