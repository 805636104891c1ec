"""Slack transport: the Web API client with its retry handlers, the slack-bolt app, and the
two ways events arrive -- Socket Mode (a websocket the app opens) and the HTTP Events API
(signed POSTs to ``/slack/events``).

* The app runs with ``process_before_response=True``: the listener awaits the adapter's
  handler (which only persists, so it is fast) and only then does bolt acknowledge -- the
  Socket Mode envelope ack, or the HTTP 200.  If the handler raises, bolt answers 500 / does
  not ack, so Slack redelivers.  Slack wants the ack within 3 s.
* 429 responses are retried after ``Retry-After`` (capped) by a retry handler on every web
  client; connection errors by slack-sdk's own handler.
* bolt ignores the bot's own events (its default self-event filter).

slack-bolt and slack-sdk are imported inside the functions, off the daemon's start-up path.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable
from typing import Any

from channels.base import ChannelError
from channels.util import parse_listen

log = logging.getLogger("chela.channels.slack")

EventHandler = Callable[[dict[str, Any]], Awaitable[None]]


def make_web_client(token: str | None, *, api_base: str, max_retry_after: float) -> Any:
    """An ``AsyncWebClient`` for ``api_base`` that retries connection errors and honours
    ``Retry-After`` exactly (at most ``max_retry_after`` seconds, 3 times)."""
    from slack_sdk.http_retry.async_handler import AsyncRetryHandler
    from slack_sdk.http_retry.builtin_async_handlers import (
        AsyncConnectionErrorRetryHandler,
        AsyncRateLimitErrorRetryHandler,
    )
    from slack_sdk.http_retry.request import HttpRequest
    from slack_sdk.http_retry.response import HttpResponse
    from slack_sdk.http_retry.state import RetryState
    from slack_sdk.web.async_client import AsyncWebClient

    class _RetryAfter(AsyncRateLimitErrorRetryHandler):
        """Honour ``Retry-After`` exactly (the SDK's handler adds up to 1 s of jitter)."""

        async def prepare_for_next_attempt_async(
            self,
            *,
            state: RetryState,
            request: HttpRequest,
            response: HttpResponse | None = None,
            error: Exception | None = None,
        ) -> None:
            if response is None:
                if error is not None:
                    raise error
                return
            delay = 1.0
            for k, v in response.headers.items():
                if k.lower() == "retry-after":
                    try:
                        delay = float(v[0] if isinstance(v, list) else v)
                    except (TypeError, ValueError):
                        delay = 1.0
                    break
            delay = max(0.0, min(delay, max_retry_after))
            log.info("slack: rate limited (%s); retrying in %.1fs", request.url, delay)
            state.next_attempt_requested = True
            await asyncio.sleep(delay)
            state.increment_current_attempt()

    handlers: list[AsyncRetryHandler] = [
        AsyncConnectionErrorRetryHandler(),
        _RetryAfter(max_retry_count=3),
    ]
    return AsyncWebClient(token=token, base_url=api_base, retry_handlers=handlers)


async def auth_test(web: Any, api_base: str) -> dict[str, Any]:
    """``auth.test``: checks the bot token and says who the bot is; ``ChannelError`` when
    the token is refused or Slack cannot be reached."""
    from slack_sdk.errors import SlackApiError

    try:
        resp = await web.auth_test()
    except SlackApiError as e:
        err = e.response.get("error", "") if e.response is not None else ""
        raise ChannelError(f"slack: auth.test failed ({err or e}); check the bot token") from e
    except Exception as e:  # aiohttp.ClientError, OSError, timeouts
        raise ChannelError(f"slack: cannot reach {api_base} ({type(e).__name__}: {e})") from e
    return dict(resp.data) if isinstance(resp.data, dict) else {}


def build_app(
    auth: dict[str, Any],
    *,
    bot_token: str,
    signing_secret: str,
    verify_requests: bool,
    client: Any,
    on_event: EventHandler,
) -> Any:
    """The bolt ``AsyncApp``: ``message`` and ``app_mention`` events go to ``on_event``
    (awaited before the ack), every other event is acknowledged and ignored."""
    from slack_bolt.async_app import AsyncApp
    from slack_bolt.authorization import AuthorizeResult

    result = AuthorizeResult(
        enterprise_id=auth.get("enterprise_id"),
        team_id=auth.get("team_id"),
        team=auth.get("team"),
        url=auth.get("url"),
        bot_user_id=auth.get("user_id") or "",
        bot_id=auth.get("bot_id") or "",
        bot_token=bot_token,
    )

    async def authorize(**_kwargs: Any) -> AuthorizeResult:
        # The bot token was verified by auth.test at start; no per-event auth.test call
        # (a failing one would make bolt ack an event without running our listener).
        return result

    app = AsyncApp(
        name="chela-slack",
        logger=logging.getLogger("chela.channels.slack.bolt"),
        client=client,
        signing_secret=signing_secret,
        authorize=authorize,
        process_before_response=True,
        request_verification_enabled=verify_requests,
    )

    async def on_message(event: dict[str, Any]) -> None:
        await on_event(event)

    async def on_other(body: dict[str, Any]) -> None:
        return None  # acknowledged, ignored (reactions, joins, …)

    app.event("message")(on_message)
    app.event("app_mention")(on_message)
    app.event(re.compile(".*"))(on_other)
    return app


class SocketModeReceiver:
    """Events over Socket Mode (slack-bolt's aiohttp handler; it reconnects on its own)."""

    def __init__(
        self, app: Any, app_token: str, *, web_client: Any, connect_timeout: float
    ) -> None:
        from slack_bolt.adapter.socket_mode.aiohttp import AsyncSocketModeHandler

        self.app_token = app_token
        self.connect_timeout = connect_timeout
        self.handler = AsyncSocketModeHandler(
            app,
            app_token,
            web_client=web_client,
            logger=logging.getLogger("chela.channels.slack.socket"),
        )

    async def start(self) -> None:
        """Open the websocket; ``ChannelError`` when the app token is refused or the first
        connection does not come up within ``connect_timeout``."""
        from slack_sdk.errors import SlackApiError

        client: Any = self.handler.client  # slack-sdk leaves connect()/close() unannotated
        try:
            # asked here rather than inside connect(), so a bad app token is reported as such
            opened = await client.web_client.apps_connections_open(app_token=self.app_token)
            client.wss_uri = opened["url"]
        except SlackApiError as e:
            err = e.response.get("error", "") if e.response is not None else ""
            raise ChannelError(
                f"slack: apps.connections.open failed ({err or e}); check the app token"
            ) from e
        except Exception as e:
            raise ChannelError(
                f"slack: cannot open a Socket Mode connection ({type(e).__name__}: {e})"
            ) from e
        try:
            # connect() retries forever on its own; bound the first attempt.
            await asyncio.wait_for(client.connect(), timeout=self.connect_timeout)
        except TimeoutError as e:
            raise ChannelError(
                f"slack: Socket Mode websocket did not connect within {self.connect_timeout}s"
            ) from e
        if not await client.is_connected():
            raise ChannelError("slack: Socket Mode websocket not connected")

    async def close(self) -> None:
        try:
            client: Any = self.handler.client
            await client.close()
        except Exception:  # pragma: no cover - best effort
            log.debug("slack: socket close failed", exc_info=True)


class HttpEventsReceiver:
    """Events over HTTP: an aiohttp server with ``POST /slack/events``; bolt checks the
    signature and answers ``url_verification``."""

    def __init__(self, app: Any, listen: str) -> None:
        self.app = app
        self.listen = listen
        self.runner: Any = None
        self.address: tuple[str, int] | None = None  # bound (host, port) once started

    async def start(self) -> None:
        """Listen; ``ChannelError`` when ``listen`` is malformed or cannot be bound."""
        from aiohttp import web
        from slack_bolt.adapter.aiohttp import to_aiohttp_response, to_bolt_request

        app = self.app

        async def events(request: web.Request) -> web.StreamResponse:
            bolt_req = await to_bolt_request(request)
            bolt_resp = await app.async_dispatch(bolt_req)
            return await to_aiohttp_response(bolt_resp)

        web_app = web.Application()
        web_app.router.add_post("/slack/events", events)
        try:
            host, port = parse_listen(self.listen)
        except ValueError as e:
            raise ChannelError(f"slack: {e}") from None
        runner = web.AppRunner(web_app, access_log=None)
        await runner.setup()
        self.runner = runner
        try:
            site = web.TCPSite(runner, host, port)
            await site.start()
        except OSError as e:
            raise ChannelError(f"slack: cannot listen on {self.listen} ({e})") from e
        addr = runner.addresses[0] if runner.addresses else (host, port)
        self.address = (addr[0], addr[1])

    async def close(self) -> None:
        runner, self.runner = self.runner, None
        self.address = None
        if runner is not None:
            try:
                await runner.cleanup()
            except Exception:  # pragma: no cover
                log.debug("slack: http runner cleanup failed", exc_info=True)
