"""Discord adapter: discord.py gateway + REST, translated to Chela's inbound/outbound messages.

Translation rules (no policy lives here):

* Our own messages (the gateway echoes what we send) are dropped.  Other bots' messages are
  passed on with ``sender_is_bot=True``; the core never answers them (SPEC §4.2) but may keep
  them as group history.
* DMs: ``chat_type="direct"``, ``chat_id`` = the DM channel id.  Guild channels:
  ``chat_type="group"``, ``group_kind="channel"``, ``chat_id`` = the channel id.  A message in
  a thread has ``chat_id`` = the parent channel id and ``thread_id`` = the thread id.
* ``mentioned``: the bot user is in ``message.mentions`` or ``<@id>`` / ``<@!id>`` is in the
  text.  ``reply_to_bot``: the referenced message's author is the bot (from the resolved
  reference, the message cache, or one REST fetch).  The text is passed as written
  (``<@id>`` mentions included).
* Attachments become not-yet-downloaded ``MediaItem``s whose ``ref`` is the CDN URL;
  ``fetch_media`` downloads one (capped) once the core has admitted the sender.
* Outbound ``chat_id`` may also be ``"user:<id>"``: a DM channel with that user is opened.

Base URLs: ``api_base`` sets ``discord.http.Route.BASE`` and ``gateway_url`` sets
``discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY``.  Both are class attributes of
discord.py, i.e. process-global: only one Discord API base per process is supported (the
previous values are restored on ``stop()``).

Rate limits: discord.py itself honours 429 / ``retry_after`` (it sleeps and retries, up to
5 tries per request).  Sends here are therefore never wrapped in short timeouts, which
would cancel those retries.
"""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path
from typing import Any

import discord
import yarl
from discord.gateway import DiscordWebSocket
from discord.http import Route

from channels.util import BoundedLRU, capped_file
from channels.base import (
    Capabilities,
    Channel,
    ChannelError,
    InboundMessage,
    InboundSink,
    MediaItem,
    MediaTooLarge,
    OutboundMessage,
    wait_task_end,
)
import contextlib

log = logging.getLogger("chela.channels.discord")

MAX_FILES_PER_MESSAGE = 10


class DiscordChannel(Channel):
    name = "discord"
    capabilities = Capabilities(
        reactions=True,
        media=True,
        threads=True,
        typing=True,
        max_text=2000,
        group_history=20,
        edit=True,
    )

    def __init__(
        self,
        *,
        token: str,
        api_base: str = "",
        gateway_url: str = "",
        account: str = "default",
        media_dir: Path | str | None = None,
        chunk_limit: int = 2000,
        max_lines: int = 17,
        ready_timeout: float = 30.0,
        guild_ready_timeout: float = 2.0,
    ) -> None:
        self.token = token
        self.api_base = api_base.rstrip("/")
        self.gateway_url = gateway_url
        self.account = account
        self.media_dir = Path(media_dir) if media_dir else None
        self.chunk_limit = min(int(chunk_limit), 2000)
        self.max_lines = max_lines
        self.ready_timeout = ready_timeout
        self.guild_ready_timeout = (
            guild_ready_timeout  # discord.py waits this long after the last GUILD_CREATE
        )
        self.client: discord.Client | None = None
        self._sink: InboundSink | None = None
        self._task: asyncio.Task | None = None
        self._ready = asyncio.Event()
        self._identity: dict = {}
        self._saved_bases: tuple[str, Any] | None = None
        # message id -> channel id it actually lives in (threads), for react()
        self._where = BoundedLRU(5000)
        # uncached channel id -> lookup of its thread parent id (None: not a thread)
        self._parents: dict[int, asyncio.Future[int | None]] = {}
        self._dm_channels: dict[int, int] = {}  # user id -> DM channel id
        self._inbound_lock = asyncio.Lock()

    # ------------------------------------------------------------------ lifecycle
    @property
    def bot_identity(self) -> dict:
        return dict(self._identity)

    def _apply_bases(self) -> None:
        if not (self.api_base or self.gateway_url):
            return
        if self._saved_bases is None:
            self._saved_bases = (Route.BASE, DiscordWebSocket.DEFAULT_GATEWAY)
        if self.api_base:
            Route.BASE = self.api_base
        if self.gateway_url:
            DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(self.gateway_url)

    def _restore_bases(self) -> None:
        if self._saved_bases is None:
            return
        base, gateway = self._saved_bases
        if self.api_base and self.api_base == Route.BASE:
            Route.BASE = base
        if self.gateway_url and yarl.URL(self.gateway_url) == DiscordWebSocket.DEFAULT_GATEWAY:
            DiscordWebSocket.DEFAULT_GATEWAY = gateway
        self._saved_bases = None

    def _make_client(self) -> discord.Client:
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
            guild_ready_timeout=self.guild_ready_timeout,
            chunk_guilds_at_startup=False,
            # Model text must never ping @everyone/@here or whole roles.
            allowed_mentions=discord.AllowedMentions(
                everyone=False, roles=False, users=True, replied_user=True
            ),
        )

        _tolerate_bad_events(client, self.account)

        @client.event
        async def on_ready() -> None:
            user = client.user
            if user is not None:
                self._identity = {
                    "id": str(user.id),
                    "username": user.name,
                    "name": getattr(user, "global_name", None) or user.name,
                }
            log.info("discord[%s]: ready as %s", self.account, self._identity.get("username"))
            self._ready.set()

        @client.event
        async def on_message(message: discord.Message) -> None:
            await self._on_message(message)

        return client

    async def start(self, sink: InboundSink) -> None:
        if self.client is not None and not self.client.is_closed():
            return
        self._sink = sink
        client = await self._login()
        self._task = asyncio.create_task(self._run(client), name=f"discord-{self.account}")
        ready_wait = asyncio.create_task(self._ready.wait())
        try:
            done, _ = await asyncio.wait(
                {ready_wait, self._task},
                timeout=self.ready_timeout,
                return_when=asyncio.FIRST_COMPLETED,
            )
        finally:
            ready_wait.cancel()
        if self._ready.is_set():
            return
        if self._task in done:
            exc = self._task.exception() if not self._task.cancelled() else None
            await self._close_client()
            if isinstance(exc, discord.PrivilegedIntentsRequired):
                raise ChannelError(
                    "discord: the bot needs the Message Content privileged intent "
                    "(enable it in the Developer Portal, Bot → Privileged Gateway Intents)"
                ) from exc
            if exc is not None:
                raise ChannelError(
                    f"discord: gateway connection failed: {type(exc).__name__}: {exc}"
                ) from exc
            raise ChannelError("discord: gateway connection closed before READY")
        await self._close_client()
        raise ChannelError(f"discord: gateway not READY within {self.ready_timeout:g}s")

    async def open_for_sending(self) -> None:
        """REST only (login, no gateway): sending needs nothing else."""
        if self.client is None or self.client.is_closed():
            await self._login()
            log.info("discord[%s]: logged in for sending only", self.account)

    async def _login(self) -> discord.Client:
        self._ready = asyncio.Event()
        self._inbound_lock = asyncio.Lock()
        self._apply_bases()
        client = self.client = self._make_client()
        try:
            await asyncio.wait_for(client.login(self.token), timeout=self.ready_timeout)
        except discord.LoginFailure as exc:
            await self._close_client()
            raise ChannelError(f"discord: login failed (bad token?): {exc}") from exc
        except TimeoutError as exc:
            await self._close_client()
            raise ChannelError(f"discord: login timed out after {self.ready_timeout:g}s") from exc
        except Exception as exc:  # HTTPException, aiohttp.ClientError, OSError
            await self._close_client()
            raise ChannelError(f"discord: login failed: {type(exc).__name__}: {exc}") from exc
        return client

    async def _run(self, client: discord.Client) -> None:
        try:
            await client.connect(reconnect=True)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if self._ready.is_set():
                log.error(
                    "discord[%s]: gateway stopped: %s: %s", self.account, type(exc).__name__, exc
                )
            raise

    async def _close_client(self) -> None:
        client, self.client = self.client, None
        if client is not None:
            try:
                await client.close()
            except Exception:  # pragma: no cover - best effort
                log.debug("discord: close failed", exc_info=True)
        task, self._task = self._task, None
        if task is not None:
            if not task.done():
                try:
                    await asyncio.wait_for(asyncio.shield(task), timeout=5)
                except (TimeoutError, Exception):
                    task.cancel()
                    with contextlib.suppress(BaseException):
                        await task
            elif not task.cancelled():
                task.exception()  # mark retrieved
        self._ready.clear()
        self._parents.clear()
        self._dm_channels.clear()

    async def stop(self) -> None:
        await self._close_client()
        self._restore_bases()

    async def wait_closed(self) -> BaseException | None:
        return await wait_task_end(self._task)

    # ------------------------------------------------------------------ inbound
    def _remember(self, message_id: int, channel_id: int) -> None:
        self._where.put(message_id, channel_id)

    async def _thread_parent(self, channel: Any) -> int | None:
        """Parent channel id if ``channel`` is a thread, else None."""
        if isinstance(channel, discord.Thread):
            return channel.parent_id
        if isinstance(channel, discord.PartialMessageable) and channel.guild_id is not None:
            # Not in the cache (e.g. a thread we were never told about): ask once per channel;
            # concurrent messages of the same channel share the lookup.
            lookup = self._parents.get(channel.id)
            if lookup is None:
                lookup = self._parents[channel.id] = asyncio.ensure_future(
                    self._fetch_parent(channel.id)
                )
            return await asyncio.shield(lookup)
        return None

    async def _fetch_parent(self, channel_id: int) -> int | None:
        try:
            assert self.client is not None
            fetched = await self.client.fetch_channel(channel_id)
        except Exception:
            log.debug("discord: could not fetch channel %s", channel_id, exc_info=True)
            self._parents.pop(channel_id, None)  # try again next time
            return None
        return fetched.parent_id if isinstance(fetched, discord.Thread) else None

    async def _is_bot_message(self, ref: discord.MessageReference | None) -> bool:
        client = self.client
        if ref is None or client is None or client.user is None or ref.message_id is None:
            return False
        resolved = ref.resolved or ref.cached_message
        if isinstance(resolved, discord.Message):
            return resolved.author.id == client.user.id
        if isinstance(resolved, discord.DeletedReferencedMessage):
            return False
        try:
            channel = client.get_partial_messageable(ref.channel_id)
            fetched = await channel.fetch_message(ref.message_id)
            return fetched.author.id == client.user.id
        except Exception:
            return False

    def translate(
        self, message: discord.Message, *, parent_id: int | None, reply_to_bot: bool
    ) -> InboundMessage:
        client = self.client
        bot_id = client.user.id if client is not None and client.user is not None else 0
        channel = message.channel
        is_dm = message.guild is None and not getattr(channel, "guild_id", None)
        if parent_id is not None:
            chat_id, thread_id = str(parent_id), str(channel.id)
        else:
            chat_id, thread_id = str(channel.id), None
        content = (
            message.content if isinstance(message.content, str) else str(message.content or "")
        )
        mentioned = any(u.id == bot_id for u in message.mentions) or (
            bool(bot_id) and (f"<@{bot_id}>" in content or f"<@!{bot_id}>" in content)
        )
        title = ""
        if not is_dm:
            name = getattr(channel, "name", None)
            if isinstance(channel, discord.Thread):
                parent = channel.parent
                title = f"#{parent.name} › {name}" if parent is not None else f"#{name}"
            elif name:
                title = f"#{name}"
        attachments = [self._media_from_attachment(a) for a in message.attachments]
        return InboundMessage(
            channel=self.name,
            chat_id=chat_id,
            sender_id=str(message.author.id),
            text=content,
            message_id=str(message.id),
            chat_type="direct" if is_dm else "group",
            account=self.account,
            thread_id=thread_id,
            sender_name=message.author.display_name,
            sender_username=message.author.name,
            chat_title=title,
            reply_to_id=str(message.reference.message_id)
            if message.reference and message.reference.message_id
            else None,
            reply_to_bot=reply_to_bot,
            mentioned=mentioned,
            sender_is_bot=bool(message.author.bot),
            attachments=attachments,
            timestamp=message.created_at.timestamp(),
            group_kind="channel",
            raw_id=str(message.id),
        )

    @staticmethod
    def _media_from_attachment(att: discord.Attachment) -> MediaItem:
        mime = att.content_type or ""
        main = mime.split("/", 1)[0]
        if main == "image":
            kind = "image"
        elif main == "video":
            kind = "video"
        elif main == "audio":
            kind = "voice" if att.is_voice_message() else "audio"
        else:
            kind = "document"
        # not downloaded here: the sender has not been admitted yet (SPEC §9.4)
        return MediaItem(
            kind=kind,  # type: ignore[arg-type]
            target="",
            name=att.filename,
            mime=mime.split(";")[0],
            ref=att.url,
            size=max(0, int(att.size or 0)),
        )

    async def fetch_media(self, item: MediaItem, dest_dir: Path, max_bytes: int) -> MediaItem:
        """Stream an attachment from the CDN (no auth needed) into ``dest_dir``, capped."""
        import dataclasses
        import re
        import uuid

        import aiohttp

        url = item.ref
        if not url:
            return item
        name = item.name or "file"
        if item.size and item.size > max_bytes:
            raise MediaTooLarge(f"discord: {name} is {item.size} bytes, over {max_bytes}")
        if not url.startswith(("https://", "http://")):
            raise ChannelError(f"discord: {name} has no download URL")
        safe = re.sub(r"[^A-Za-z0-9._-]+", "_", Path(name).name).strip("._")[:80] or "file"
        dest = Path(dest_dir).absolute() / f"discord_{uuid.uuid4().hex[:12]}_{safe}"
        timeout = aiohttp.ClientTimeout(total=300, sock_connect=20)
        with capped_file(dest, max_bytes, f"discord: downloading {name}") as out:
            async with (
                aiohttp.ClientSession(timeout=timeout) as session,
                session.get(url) as r,
            ):
                if r.status != 200:
                    raise ChannelError(f"discord: downloading {name} answered HTTP {r.status}")
                if r.content_length is not None and r.content_length > max_bytes:
                    raise MediaTooLarge(
                        f"discord: {name} is {r.content_length} bytes, over {max_bytes}"
                    )
                async for chunk in r.content.iter_chunked(64 * 1024):
                    out.write(chunk)
        return dataclasses.replace(item, target=str(dest))

    async def _on_message(self, message: discord.Message) -> None:
        client = self.client
        if client is None or client.user is None or self._sink is None:
            return
        if message.author.id == client.user.id:
            return  # our own echo
        if message.type not in (discord.MessageType.default, discord.MessageType.reply):
            return  # joins, pins, thread-created notices …
        self._remember(message.id, message.channel.id)
        # discord.py runs each on_message in its own task, in gateway order.  Taking this
        # FIFO lock before the first await keeps delivery to the sink in arrival order even
        # when translating one message needs a REST lookup (SPEC §4.5).
        async with self._inbound_lock:
            await self._deliver(message)

    async def _deliver(self, message: discord.Message) -> None:
        assert self._sink is not None
        try:
            parent_id = await self._thread_parent(message.channel)
            reply_to_bot = await self._is_bot_message(message.reference)
            inbound = self.translate(message, parent_id=parent_id, reply_to_bot=reply_to_bot)
        except Exception:
            log.exception("discord[%s]: could not translate message %s", self.account, message.id)
            return
        try:
            await self._sink(inbound)
        except Exception:
            # The gateway has no acknowledgement to withhold; the sink logs its own failure.
            log.exception("discord[%s]: sink failed for message %s", self.account, message.id)

    # ------------------------------------------------------------------ outbound
    def _require_client(self) -> discord.Client:
        client = self.client
        if client is None or client.is_closed():
            raise ChannelError("discord: not connected")
        return client

    async def _resolve_channel_id(self, chat_id: str, thread_id: str | None) -> int:
        if thread_id:
            return int(thread_id)
        if chat_id.startswith("user:"):
            user_id = int(chat_id[5:])
            if user_id not in self._dm_channels:
                client = self._require_client()
                try:
                    data = await client.http.start_private_message(user_id)
                except discord.HTTPException as exc:
                    raise ChannelError(f"discord: cannot open DM with {user_id}: {exc}") from exc
                self._dm_channels[user_id] = int(data["id"])
            return self._dm_channels[user_id]
        try:
            return int(chat_id)
        except ValueError as exc:
            raise ChannelError(f"discord: bad chat id {chat_id!r}") from exc

    def _chunks(self, text: str) -> list[str]:
        if not text.strip():
            return []
        from channels.chunking import chunk_markdown

        return [
            c for c in chunk_markdown(text, self.chunk_limit, max_lines=self.max_lines) if c.strip()
        ]

    async def send(self, msg: OutboundMessage) -> list[str]:
        client = self._require_client()
        channel_id = await self._resolve_channel_id(msg.chat_id, msg.thread_id)
        channel = client.get_partial_messageable(channel_id)

        reference: discord.MessageReference | None = None
        if msg.reply_to_id:
            try:
                reference = discord.MessageReference(
                    message_id=int(msg.reply_to_id), channel_id=channel_id, fail_if_not_exists=False
                )
            except ValueError:
                log.warning("discord: ignoring non-numeric reply_to_id %r", msg.reply_to_id)

        # Build the list of messages to send, in order: text chunks, then attachments
        # (consecutive local files grouped up to 10 per message, URLs / notes as text).
        plan: list[tuple[str, Any]] = [("text", c) for c in self._chunks(msg.text)]
        pending_lines: list[str] = []
        pending_files: list[MediaItem] = []

        def flush_lines() -> None:
            if pending_lines:
                plan.extend(("text", c) for c in self._chunks("\n".join(pending_lines)))
                pending_lines.clear()

        def flush_files() -> None:
            if pending_files:
                plan.append(("files", list(pending_files)))
                pending_files.clear()

        for item in msg.media:
            if item.is_url:
                flush_files()
                pending_lines.append(item.target)
                continue
            path = Path(item.target)
            if not path.is_file():
                flush_files()
                pending_lines.append(f"[attachment unavailable: {item.name or path.name}]")
                continue
            flush_lines()
            pending_files.append(item)
            if len(pending_files) >= MAX_FILES_PER_MESSAGE:
                flush_files()
        flush_lines()
        flush_files()

        ids: list[str] = []
        errors: list[str] = []
        last_exc: BaseException | None = None
        key = msg.idempotency_key[:20]
        preview = msg.edit_id  # a live preview the first text chunk replaces (SPEC §12)
        for index, (kind, value) in enumerate(plan):
            ref = None
            if reference is not None and (msg.reply_mode == "all" or index == 0):
                ref = reference
            if preview and kind == "text":
                target, preview = preview, ""
                if await self._replace_preview(channel, target, value):
                    ids.append(target)
                    continue
            # the same nonce on every attempt (retries, after a crash): with enforce_nonce
            # (discord.py sets it with the nonce) Discord returns the message it already
            # created instead of posting it twice
            nonce = f"{key}.{index}" if key else None
            try:
                sent: discord.Message | None
                if kind == "text":
                    sent = await channel.send(value, **_send_options(ref, nonce))
                else:
                    sent = await self._send_files(channel, value, ref, nonce)
                    if sent is None:
                        names = ", ".join(i.name or Path(i.target).name for i in value)
                        note = "\n".join(
                            f"[attachment unavailable: {i.name or Path(i.target).name}]"
                            for i in value
                        )
                        errors.append(f"upload failed: {names}")
                        sent = await channel.send(
                            note, **_send_options(ref, f"{nonce}n" if nonce else None)
                        )
            except discord.HTTPException as exc:
                last_exc = exc
                errors.append(f"{exc.status} {exc.text or exc}")
                log.warning("discord[%s]: send to %s failed: %s", self.account, channel_id, exc)
                continue
            except (TimeoutError, OSError) as exc:
                last_exc = exc
                errors.append(f"{type(exc).__name__}: {exc}")
                log.warning("discord[%s]: send to %s failed: %s", self.account, channel_id, exc)
                continue
            ids.append(str(sent.id))
            self._remember(sent.id, channel_id)
        if not ids and plan:
            raise ChannelError(
                f"discord: nothing delivered to {channel_id}: {'; '.join(errors)}"
            ) from last_exc
        return ids

    # ------------------------------------------------------------------ live previews
    async def send_preview(
        self,
        chat_id: str,
        text: str,
        *,
        thread_id: str | None = None,
        reply_to_id: str | None = None,
    ) -> str:
        client = self._require_client()
        channel_id = await self._resolve_channel_id(chat_id, thread_id)
        channel = client.get_partial_messageable(channel_id)
        reference = None
        if reply_to_id and reply_to_id.isdigit():
            reference = discord.MessageReference(
                message_id=int(reply_to_id), channel_id=channel_id, fail_if_not_exists=False
            )
        sent = await channel.send(text[: self.chunk_limit], **_send_options(reference, None))
        self._remember(sent.id, channel_id)
        return str(sent.id)

    async def _preview_message(
        self, chat_id: str, message_id: str, thread_id: str | None
    ) -> discord.PartialMessage:
        client = self._require_client()
        mid = int(message_id)
        channel_id = self._where.get(mid) or await self._resolve_channel_id(chat_id, thread_id)
        return client.get_partial_messageable(channel_id).get_partial_message(mid)

    async def edit_preview(
        self, chat_id: str, message_id: str, text: str, *, thread_id: str | None = None
    ) -> None:
        message = await self._preview_message(chat_id, message_id, thread_id)
        await message.edit(content=text[: self.chunk_limit])

    async def delete_message(
        self, chat_id: str, message_id: str, *, thread_id: str | None = None
    ) -> None:
        message = await self._preview_message(chat_id, message_id, thread_id)
        await message.delete()

    async def _replace_preview(
        self, channel: discord.PartialMessageable, message_id: str, chunk: str
    ) -> bool:
        """Edit a live preview into the reply's first chunk.  False when Discord refuses
        (the message is gone): the preview is deleted and the chunk goes out as a new
        message.  Transient failures raise (the outbox retries; an edit is idempotent)."""
        message = channel.get_partial_message(int(message_id))
        try:
            await message.edit(content=chunk)
            return True
        except (discord.NotFound, discord.Forbidden) as exc:
            log.info(
                "discord[%s]: the preview %s could not be edited (%s); sending the reply anew",
                self.account,
                message_id,
                exc,
            )
        except discord.HTTPException as exc:
            if exc.status >= 500 or exc.status == 429:
                raise
            log.info("discord[%s]: editing the preview failed (%s)", self.account, exc)
        with contextlib.suppress(Exception):
            await message.delete()
        return False

    async def _send_files(
        self,
        channel: discord.PartialMessageable,
        items: list[MediaItem],
        ref: discord.MessageReference | None,
        nonce: str | None = None,
    ) -> discord.Message | None:
        files: list[discord.File] = []
        try:
            for item in items:
                files.append(
                    discord.File(item.target, filename=item.name or os.path.basename(item.target))
                )
            return await channel.send(files=files, **_send_options(ref, nonce))
        except (discord.HTTPException, OSError, ValueError) as exc:
            log.warning("discord[%s]: upload failed: %s", self.account, exc)
            return None
        finally:
            for f in files:
                with contextlib.suppress(Exception):
                    f.close()

    async def typing(self, chat_id: str, thread_id: str | None = None) -> None:
        try:
            client = self._require_client()
            channel_id = await self._resolve_channel_id(chat_id, thread_id)
            await client.http.send_typing(channel_id)
        except Exception as exc:
            log.debug("discord[%s]: typing failed: %s", self.account, exc)

    async def react(self, chat_id: str, message_id: str, emoji: str) -> None:
        try:
            client = self._require_client()
            mid = int(message_id)
            channel_id = self._where.get(mid) or await self._resolve_channel_id(chat_id, None)
            await (
                client.get_partial_messageable(channel_id)
                .get_partial_message(mid)
                .add_reaction(emoji)
            )
        except Exception as exc:
            log.warning(
                "discord[%s]: reaction %r on %s failed: %s", self.account, emoji, message_id, exc
            )


def _tolerate_bad_events(client: discord.Client, account: str) -> None:
    """One malformed gateway event (author null, a missing channel_id, non-numeric ids,
    garbage attachments) must not end the connection.  discord.py runs its event parsers
    unguarded, so a parser's exception closes the gateway and the next login drops what was
    queued.  Each parser of *this* client (``client._connection.parsers``, built per client:
    nothing global is patched) now logs and skips an event it cannot parse."""
    parsers = client._connection.parsers

    def tolerant(event: str, parse):
        def run(data):
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


def _send_options(reference: Any, nonce: str | None) -> dict[str, Any]:
    """``Messageable.send`` keywords: a reply reference and an idempotency nonce, each only
    when there is one (discord.py's defaults are "not given", not None)."""
    out: dict[str, Any] = {}
    if reference is not None:
        out["reference"] = reference
    if nonce:
        out["nonce"] = nonce
    return out
