"""Discord adapter: ``DiscordChannel`` wires the discord.py transport (``transport.py``) and
the pure translators (``translate.py``) and keeps the channel's state: the bot's identity,
where each message lives (threads), thread parents and DM channels.

* Inbound: ``on_message`` → ``transport.message_payload`` → the lookups the payload cannot
  answer (a thread's parent, the author of a replied-to message, each at most one REST call)
  → ``translate.inbound_message`` → the sink, in gateway order.  ``fetch_media`` downloads
  an attachment (capped) once the core has admitted the sender.
* Outbound: ``translate.plan_send`` → the calls, run here.  ``chat_id`` may also be
  ``"user:<id>"``: a DM channel with that user is opened.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from pathlib import Path
from typing import Any

import discord

from channels.base import (
    Capabilities,
    Channel,
    ChannelError,
    InboundSink,
    MediaItem,
    OutboundMessage,
    wait_task_end,
)
from channels.discord import media, outbound, translate, transport
from channels.discord.transport import make_client
from channels.util import BoundedLRU

log = logging.getLogger("chela.channels.discord")

MAX_FILES_PER_MESSAGE = translate.MAX_FILES_PER_MESSAGE


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

    def _make_client(self) -> discord.Client:
        client = make_client(
            account=self.account,
            guild_ready_timeout=self.guild_ready_timeout,
            api_base=self.api_base,
            gateway_url=self.gateway_url,
        )

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

    async def _reply_to_bot(self, payload: dict[str, Any], bot_id: int) -> bool:
        """Whether the message answers one of the bot's: from the payload (the resolved
        reference or the message cache) when it tells, else one REST fetch."""
        known = translate.reply_to_bot(payload, bot_id)
        if known is not None:
            return known
        client = self.client
        ref = payload.get("message_reference") or {}
        message_id = translate.snowflake(ref.get("message_id"))
        channel_id = translate.referenced_channel(payload)
        if client is None or message_id is None or channel_id is None:
            return False
        try:
            fetched = await client.get_partial_messageable(channel_id).fetch_message(message_id)
        except Exception:
            return False
        return fetched.author.id == bot_id

    @staticmethod
    def _title(message: discord.Message, payload: dict[str, Any]) -> str:
        channel = message.channel
        thread = isinstance(channel, discord.Thread)
        parent = channel.parent if isinstance(channel, discord.Thread) else None
        return translate.channel_title(
            getattr(channel, "name", None),
            is_dm="guild_id" not in payload,
            thread=thread,
            parent_name=parent.name if parent is not None else None,
        )

    async def fetch_media(self, item: MediaItem, dest_dir: Path, max_bytes: int) -> MediaItem:
        """Stream an attachment from the CDN (no auth needed) into ``dest_dir``, capped."""
        return await media.fetch_media(item, dest_dir, max_bytes)

    async def _on_message(self, message: discord.Message) -> None:
        client = self.client
        if client is None or client.user is None or self._sink is None:
            return
        bot_id = client.user.id
        try:
            payload = transport.message_payload(message)
        except Exception:
            log.exception("discord[%s]: could not read message %s", self.account, message.id)
            return
        if not translate.is_chat_message(payload, bot_id):
            return  # our own echo; joins, pins, thread-created notices …
        self._remember(message.id, message.channel.id)
        # discord.py runs each on_message in its own task, in gateway order.  Taking this
        # FIFO lock before the first await keeps delivery to the sink in arrival order even
        # when translating one message needs a REST lookup.
        async with self._inbound_lock:
            await self._deliver(message, payload, bot_id)

    async def _deliver(
        self, message: discord.Message, payload: dict[str, Any], bot_id: int
    ) -> None:
        assert self._sink is not None
        try:
            parent_id = await self._thread_parent(message.channel)
            inbound = translate.inbound_message(
                payload,
                bot_id=bot_id,
                account=self.account,
                parent_id=parent_id,
                reply_to_bot=await self._reply_to_bot(payload, bot_id),
                chat_title=self._title(message, payload),
            )
        except Exception:
            log.exception("discord[%s]: could not translate message %s", self.account, message.id)
            return
        if inbound is None:
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

    async def send(self, msg: OutboundMessage) -> list[str]:
        client = self._require_client()
        channel_id = await self._resolve_channel_id(msg.chat_id, msg.thread_id)
        channel = client.get_partial_messageable(channel_id)
        if msg.reply_to_id and translate.reply_reference(msg.reply_to_id) is None:
            log.warning("discord: ignoring non-numeric reply_to_id %r", msg.reply_to_id)
        local_files = {
            item.target for item in msg.media if not item.is_url and Path(item.target).is_file()
        }
        plan = translate.plan_send(
            msg,
            channel_id=channel_id,
            chunk_limit=self.chunk_limit,
            max_lines=self.max_lines,
            local_files=local_files,
        )

        ids: list[str] = []
        errors: list[str] = []
        last_exc: BaseException | None = None
        for call in plan:
            try:
                sent_id = await self._run_call(channel, call, errors)
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
            ids.append(sent_id)
        if not ids and plan:
            raise ChannelError(
                f"discord: nothing delivered to {channel_id}: {'; '.join(errors)}"
            ) from last_exc
        return ids

    async def _run_call(
        self, channel: discord.PartialMessageable, call: translate.ApiCall, errors: list[str]
    ) -> str:
        """Make one planned call (its fallback when Discord refuses it); the id of the
        message it leaves."""
        params = call.params
        if call.method == translate.EDIT:
            # a live preview the first text chunk replaces
            if await self._replace_preview(channel, params["message_id"], params["content"]):
                return str(params["message_id"])
            send = call.fallback[-1]
            return await self._run_call(channel, send, errors)
        if call.method == translate.SEND_FILES:
            sent = await self._send_files(channel, params)
            if sent is None:
                errors.append(f"upload failed: {', '.join(n for _, n in params['files'])}")
                return await self._run_call(channel, call.fallback[0], errors)
        else:
            sent = await channel.send(params["content"], **outbound.send_options(channel, params))
        self._remember(sent.id, channel.id)
        return str(sent.id)

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
        call = translate.preview_send(
            channel_id, text, limit=self.chunk_limit, reply_to_id=reply_to_id
        )
        sent = await channel.send(
            call.params["content"], **outbound.send_options(channel, call.params)
        )
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
        call = translate.preview_edit(message.channel.id, message.id, text, limit=self.chunk_limit)
        await message.edit(content=call.params["content"])

    async def delete_message(
        self, chat_id: str, message_id: str, *, thread_id: str | None = None
    ) -> None:
        message = await self._preview_message(chat_id, message_id, thread_id)
        await message.delete()

    async def _replace_preview(
        self, channel: discord.PartialMessageable, message_id: int, chunk: str
    ) -> bool:
        return await outbound.replace_preview(channel, message_id, chunk, self.account)

    async def _send_files(
        self, channel: discord.PartialMessageable, params: dict[str, Any]
    ) -> discord.Message | None:
        return await outbound.send_files(channel, params, self.account)

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
