"""Discord transport: the discord.py client (gateway + REST) set-up, apart from translation.

* ``make_client`` builds a ``discord.Client`` with the intents and mention rules Chela needs
  and guards its event parsers (``tolerate_bad_events``).
* ``ApiBases`` points discord.py at another API base / gateway URL (the fakes in tests).
* ``message_payload`` turns the parsed ``discord.Message`` the gateway hands ``on_message``
  back into the ``MESSAGE_CREATE`` shape ``translate.py`` reads, from public attributes.

Base URLs: ``discord.http.Route.BASE`` and ``discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY``
are class attributes of discord.py, i.e. process-global, and discord.py offers no other way
to set them: only one Discord API base per process is supported (the previous values are
restored by ``ApiBases.restore``).

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
from discord.http import Route

log = logging.getLogger("chela.channels.discord")


def make_client(*, account: str, guild_ready_timeout: float) -> discord.Client:
    # Chela never uses voice: silence discord.py's "PyNaCl/davey is not installed" warnings.
    discord.VoiceClient.warn_nacl = False
    if hasattr(discord.VoiceClient, "warn_dave"):
        discord.VoiceClient.warn_dave = False
    intents = discord.Intents.default()
    intents.message_content = True
    intents.dm_messages = True
    intents.guild_messages = True
    client = discord.Client(
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
    that raises logs and skips its event.  This is the only private API the adapter uses."""
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


class ApiBases:
    """Sets and restores discord.py's API base and default gateway URL (process-global)."""

    def __init__(self, api_base: str, gateway_url: str) -> None:
        self.api_base = api_base
        self.gateway_url = gateway_url
        self._saved: tuple[str, Any] | None = None

    def apply(self) -> None:
        if not (self.api_base or self.gateway_url):
            return
        if self._saved is None:
            self._saved = (Route.BASE, DiscordWebSocket.DEFAULT_GATEWAY)
        if self.api_base:
            Route.BASE = self.api_base
        if self.gateway_url:
            DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(self.gateway_url)

    def restore(self) -> None:
        if self._saved is None:
            return
        base, gateway = self._saved
        if self.api_base and self.api_base == Route.BASE:
            Route.BASE = base
        if self.gateway_url and yarl.URL(self.gateway_url) == DiscordWebSocket.DEFAULT_GATEWAY:
            DiscordWebSocket.DEFAULT_GATEWAY = gateway
        self._saved = None


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
