"""Discord transport: the discord.py client (gateway + REST) set-up, apart from translation.

* ``make_client`` builds a ``discord.Client`` with the intents and mention rules Chela needs
  and guards its event parsers (``tolerate_bad_events``).
* ``RoutedHTTPClient`` sends this client's REST calls to its own API base and opens its
  gateway at its own URL (the fakes in tests), so two accounts with different bases can run
  in one process.
* ``message_payload`` turns the parsed ``discord.Message`` the gateway hands ``on_message``
  back into the ``MESSAGE_CREATE`` shape ``translate.py`` reads, from public attributes.

Base URLs: discord.py keeps them in class attributes (``discord.http.Route.BASE``,
``discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY``), which this module never sets.  Every
REST call goes through ``HTTPClient.request`` and every gateway connection (the first, a
resume, a reconnect after an invalidated session) through ``HTTPClient.ws_connect``, both
methods of the client's own ``HTTPClient``: ``RoutedHTTPClient`` rewrites the URL there.

Rate limits: discord.py itself honours 429 / ``retry_after`` (it sleeps and retries, up to
5 tries per request).  Sends are therefore never wrapped in short timeouts, which would
cancel those retries.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import discord
import yarl
from discord.gateway import DiscordWebSocket
from discord.http import HTTPClient, Route

log = logging.getLogger("chela.channels.discord")


class _NoVoiceWarning(logging.Filter):
    """Chela never uses voice: discord.py's "PyNaCl/davey is not installed, voice will NOT be
    supported" start-up warnings say nothing to its owner, so they are dropped (through
    logging's own filter API; discord.py itself is left as it is)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "voice will NOT be supported" not in record.getMessage()


_NO_VOICE = _NoVoiceWarning()


def make_client(
    *, account: str, guild_ready_timeout: float, api_base: str = "", gateway_url: str = ""
) -> discord.Client:
    logging.getLogger("discord.client").addFilter(_NO_VOICE)  # once: the same filter object
    intents = discord.Intents.default()
    intents.message_content = True
    intents.dm_messages = True
    intents.guild_messages = True
    client = _Client(
        api_base=api_base,
        gateway_url=gateway_url,
        intents=intents,
        guild_ready_timeout=guild_ready_timeout,
        chunk_guilds_at_startup=False,
        # Model text must never ping @everyone/@here or whole roles.
        allowed_mentions=discord.AllowedMentions(
            everyone=False, roles=False, users=True, replied_user=True
        ),
    )
    tolerate_bad_events(client, account)
    return client


def tolerate_bad_events(client: discord.Client, account: str) -> None:
    """One malformed gateway event (author null, a missing channel_id, non-numeric ids,
    garbage attachments) must not end the connection.  discord.py runs its event parsers
    unguarded (``DiscordWebSocket.received_message`` calls the parser with no ``try``), so a
    parser's exception closes the gateway and the next login drops what was queued.

    discord.py has no public hook that runs *instead of* a parser: ``on_socket_raw_receive``
    and ``on_socket_event_type`` only observe, and ``on_error`` covers event handlers, not
    parsers.  So this wraps each parser of *this* client (``client._connection.parsers``, a
    private attribute, but a dict built per client: nothing global is patched): a parser
    that raises logs and skips its event.  One of the two private members the channels use
    (with ``_Client._get_state`` below), both because discord.py has no public option; see
    docs/channels.md."""
    parsers: dict[str, Callable[[Any], Any]] = client._connection.parsers

    def tolerant(event: str, parse: Callable[[Any], Any]) -> Callable[[Any], Any]:
        def run(data: Any) -> Any:
            try:
                return parse(data)
            except Exception as exc:
                log.warning(
                    "discord[%s]: skipped a malformed %s event: %s: %s",
                    account,
                    event,
                    type(exc).__name__,
                    exc,
                )
                return None

        return run

    for event, parse in list(parsers.items()):
        parsers[event] = tolerant(event, parse)


class RoutedHTTPClient(HTTPClient):
    """discord.py's HTTP client with this client's own API base and gateway URL.

    ``request`` replaces the ``Route.BASE`` prefix of each route's URL (a ``Route`` is built
    per call, so nothing shared changes) and ``ws_connect`` replaces the default gateway
    (``DiscordWebSocket.DEFAULT_GATEWAY``, which discord.py uses for the first connection and
    after an invalidated session) by ``gateway_url``, keeping the query (version, encoding,
    compression).  A resume URL the gateway itself handed out is left as it is.  Empty bases
    change nothing (the real Discord)."""

    def __init__(
        self, loop: Any, *, api_base: str = "", gateway_url: str = "", **options: Any
    ) -> None:
        super().__init__(loop, **options)
        self.api_base = api_base.rstrip("/")
        self.gateway_url = yarl.URL(gateway_url) if gateway_url else None

    def route_url(self, url: str) -> str:
        base = Route.BASE
        if self.api_base and url.startswith(base):
            return self.api_base + url[len(base) :]
        return url

    def gateway_for(self, url: str) -> str:
        given = yarl.URL(url)
        if self.gateway_url is None or given.with_query(None) != DiscordWebSocket.DEFAULT_GATEWAY:
            return url
        return str(self.gateway_url.with_query(given.query))

    async def request(self, route: Route, **kwargs: Any) -> Any:
        route.url = self.route_url(route.url)
        return await super().request(route, **kwargs)

    async def ws_connect(self, url: str, *, compress: int = 0) -> Any:
        return await super().ws_connect(self.gateway_for(url), compress=compress)


class _Client(discord.Client):
    """A ``discord.Client`` whose HTTP client is a ``RoutedHTTPClient``.  ``_get_state`` is
    where discord.py hands ``self.http`` to the connection state, right after building it in
    ``Client.__init__``: the routed client takes its place there, before anything holds the
    stock one (Chela passes none of the connector/proxy options it would carry).

    The accepted exception to the rule against a library's private members (CONTRIBUTING.md):
    discord.py has no public option for its API base or gateway URL, and without one the
    channel cannot be pointed at a wire fake or a proxy."""

    def __init__(self, *, api_base: str, gateway_url: str, **options: Any) -> None:
        self._bases = (api_base, gateway_url)
        super().__init__(**options)

    def _get_state(self, **options: Any) -> Any:
        api_base, gateway_url = self._bases
        self.http = RoutedHTTPClient(self.http.loop, api_base=api_base, gateway_url=gateway_url)
        return super()._get_state(**options)


def _attachment(att: discord.Attachment) -> dict[str, Any]:
    return {
        "filename": att.filename,
        "content_type": att.content_type,
        "url": att.url,
        "size": att.size,
        "duration_secs": att.duration,
        "waveform": att.waveform,
    }


def message_payload(message: discord.Message) -> dict[str, Any]:
    """A parsed message back in the ``MESSAGE_CREATE`` shape, from public attributes.
    ``referenced_message`` is present when discord.py knows the replied-to message (resolved
    or cached: its author) or that it was deleted (``None``); absent when only a fetch can
    tell."""
    channel = message.channel
    author = message.author
    guild_id = message.guild.id if message.guild is not None else getattr(channel, "guild_id", None)
    payload: dict[str, Any] = {
        "id": str(message.id),
        "channel_id": str(channel.id),
        "type": message.type.value,
        "author": {
            "id": str(author.id),
            "username": author.name,
            "global_name": getattr(author, "global_name", None),
            "bot": bool(author.bot),
        },
        "content": message.content if isinstance(message.content, str) else "",
        "mentions": [{"id": str(u.id)} for u in message.mentions],
        "attachments": [_attachment(a) for a in message.attachments],
    }
    if guild_id:
        payload["guild_id"] = str(guild_id)
    nick = getattr(author, "nick", None)
    if nick:
        payload["member"] = {"nick": nick}
    ref = message.reference
    if ref is not None and ref.message_id is not None:
        payload["message_reference"] = {
            "message_id": str(ref.message_id),
            "channel_id": str(ref.channel_id),
        }
        resolved = ref.resolved or ref.cached_message
        if isinstance(resolved, discord.Message):
            payload["referenced_message"] = {"author": {"id": str(resolved.author.id)}}
        elif isinstance(resolved, discord.DeletedReferencedMessage):
            payload["referenced_message"] = None
    return payload
