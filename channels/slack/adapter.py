"""Slack adapter: wires the transport to the translators and keeps the channel's state.

Transport (``transport.py``): slack-bolt's ``AsyncApp`` over Socket Mode (default) or the
HTTP Events API, and slack-sdk web clients that honour ``Retry-After``.  Translation
(event → ``InboundMessage``, ``OutboundMessage`` → Web API calls, previews, reactions) is
pure and lives in ``translate.py``.  This module keeps what those need between calls: who
the bot is (``auth.test``), the threads the bot posted in and its own top-level messages
(bounded), and the de-duplication of inbound events.

* inbound ``message`` (DMs, channels, threads) and ``app_mention`` events become ONE
  ``InboundMessage`` per ``(channel, ts)``: Slack sends both events for a mention and retries
  events it thinks were not acknowledged, so a bounded LRU of delivered keys (plus an
  in-flight table for the two events racing each other) drops the duplicates;
* the handler awaits the sink before bolt acknowledges (see ``transport.py``).  Inbound files
  are NOT downloaded here: each attachment carries its private URL as ``ref`` and the core
  calls ``fetch_media`` once the sender is admitted, which streams it with the
  bot token and a size cap;
* ``send`` runs the calls ``translate.plan_send`` lists: mrkdwn chunks via
  ``chat.postMessage`` (the first one a ``chat.update`` of a live preview), local files via
  ``files_upload_v2``, URLs as ``<url|name>`` links.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
import uuid
from pathlib import Path
from typing import Any

from channels.base import (
    Capabilities,
    Channel,
    ChannelError,
    InboundMessage,
    InboundSink,
    MediaItem,
    MediaTooLarge,
    OutboundMessage,
)
from channels.slack import transport
from channels.slack import translate
from channels.slack.translate import SLACK_HARD_LIMIT, ApiCall, BotIdentity
from channels.util import BoundedLRU, capped_file

log = logging.getLogger("chela.channels.slack")

_DOWNLOAD_TIMEOUT = 120.0  # whole-file limit for one inbound download
# chat.update errors that say "try again later", not "this preview cannot be edited"
_TRANSIENT = ("ratelimited", "fatal_error", "internal_error", "request_timeout")


class SlackChannel(Channel):
    name = "slack"
    capabilities = Capabilities(
        reactions=True, media=True, threads=True, typing=False, max_text=4000, edit=True
    )

    def __init__(
        self,
        *,
        bot_token: str,
        mode: str = "socket",
        app_token: str = "",
        signing_secret: str = "",
        api_base: str = "https://slack.com/api/",
        listen: str = "127.0.0.1:3000",
        account: str = "default",
        media_dir: Path | str | None = None,
        chunk_limit: int = 4000,
        connect_timeout: float = 20.0,
        max_retry_after: float = 60.0,
    ) -> None:
        if mode not in ("socket", "http"):
            raise ChannelError(f"slack: unknown mode {mode!r} (want 'socket' or 'http')")
        self.mode = mode
        self.bot_token = bot_token or ""
        self.app_token = app_token or ""
        self.signing_secret = signing_secret or ""
        self.api_base = (api_base or "https://slack.com/api/").rstrip("/") + "/"
        self.listen = listen
        self.account = account
        self.media_dir = Path(media_dir) if media_dir else None
        self.chunk_limit = max(1, min(int(chunk_limit), SLACK_HARD_LIMIT))
        self.connect_timeout = connect_timeout
        self.max_retry_after = max_retry_after
        self.capabilities = dataclasses.replace(type(self).capabilities, max_text=self.chunk_limit)

        self._web = self._make_web_client(self.bot_token)
        self._sink: InboundSink | None = None
        self._identity: dict[str, str] = {}
        self._bot = BotIdentity()
        self._receiver: transport.SocketModeReceiver | transport.HttpEventsReceiver | None = None

        self._seen = BoundedLRU(5000)  # (channel, ts) already handed to the sink
        self._inflight: dict[tuple[str, str], asyncio.Future[bool]] = {}
        self._sink_lock = asyncio.Lock()
        self._bot_threads = BoundedLRU(2000)  # thread roots the bot posted in (or started)
        self._bot_roots = BoundedLRU(2000)  # ts of the bot's own top-level messages
        self._started = False

    # ------------------------------------------------------------------ plumbing

    def _make_web_client(self, token: str | None) -> Any:
        return transport.make_web_client(
            token, api_base=self.api_base, max_retry_after=self.max_retry_after
        )

    @property
    def bot_identity(self) -> dict[str, str]:
        return dict(self._identity)

    # ------------------------------------------------------------------ lifecycle

    async def start(self, sink: InboundSink) -> None:
        if self._started:
            return
        if not self.bot_token:
            raise ChannelError("slack: no bot token configured (bot_token_env)")
        if self.mode == "socket" and not self.app_token:
            raise ChannelError(
                "slack: socket mode needs an app-level token (xapp-…, app_token_env)"
            )
        if self.mode == "http" and not self.signing_secret:
            raise ChannelError("slack: http mode needs the signing secret (signing_secret_env)")

        auth = await self._auth()
        self._sink = sink
        app = transport.build_app(
            auth,
            bot_token=self.bot_token,
            signing_secret=self.signing_secret,
            verify_requests=self.mode == "http",
            client=self._make_web_client(None),
            on_event=self._handle_event,
        )
        if self.mode == "socket":
            self._receiver = transport.SocketModeReceiver(
                app,
                self.app_token,
                web_client=self._make_web_client(None),
                connect_timeout=self.connect_timeout,
            )
        else:
            self._receiver = transport.HttpEventsReceiver(app, self.listen)
        try:
            await self._receiver.start()
        except BaseException:
            await self._teardown()
            raise
        self._started = True
        log.info(
            "slack: connected as %s (%s) via %s mode",
            self._bot.username,
            self._bot.user_id,
            self.mode,
        )

    async def open_for_sending(self) -> None:
        """Web API only (no Socket Mode, no HTTP endpoint)."""
        if not self.bot_token:
            raise ChannelError("slack: no bot token configured (bot_token_env)")
        await self._auth()
        log.info("slack: authenticated as %s for sending only", self._bot.username)

    async def _auth(self) -> dict[str, Any]:
        """auth.test: checks the bot token and learns who we are."""
        auth = await transport.auth_test(self._web, self.api_base)
        self._bot = BotIdentity(
            user_id=auth.get("user_id") or "",
            bot_id=auth.get("bot_id") or "",
            username=auth.get("user") or "",
        )
        self._identity = {
            "id": self._bot.user_id,
            "username": self._bot.username,
            "bot_id": self._bot.bot_id,
            "team_id": auth.get("team_id") or "",
            "team": auth.get("team") or "",
        }
        return auth

    async def stop(self) -> None:
        self._started = False
        await self._teardown()

    async def _teardown(self) -> None:
        receiver, self._receiver = self._receiver, None
        if receiver is not None:
            await receiver.close()

    @property
    def http_address(self) -> tuple[str, int] | None:
        """The bound (host, port) in HTTP mode once the server runs."""
        receiver = self._receiver
        return receiver.address if isinstance(receiver, transport.HttpEventsReceiver) else None

    @property
    def http_url(self) -> str:
        """``http://host:port/slack/events`` once the HTTP server runs (handy for tests)."""
        addr = self.http_address
        if not addr:
            return ""
        return f"http://{addr[0]}:{addr[1]}/slack/events"

    # ------------------------------------------------------------------ inbound

    def _translate(self, event: object) -> InboundMessage | None:
        return translate.inbound_message(
            event,
            bot=self._bot,
            bot_threads=self._bot_threads,
            bot_roots=self._bot_roots,
            account=self.account,
            now=time.time(),
        )

    async def _handle_event(self, event: dict[str, Any]) -> None:
        msg = self._translate(event)
        if msg is None or self._sink is None:
            return
        key = (msg.chat_id, msg.message_id)
        while True:
            if key in self._seen:
                return
            pending = self._inflight.get(key)
            if pending is None:
                break
            if await asyncio.shield(pending):
                return
            # the first delivery failed; try again with this event
        fut: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._inflight[key] = fut
        try:
            async with self._sink_lock:  # FIFO: hand messages over in the order they got here
                await self._sink(msg)
        except BaseException:
            fut.set_result(False)
            raise
        else:
            self._seen.put(key)
            fut.set_result(True)
        finally:
            self._inflight.pop(key, None)

    @staticmethod
    def _attachments(files: list[Any]) -> list[MediaItem]:
        """Event files as not-yet-downloaded attachments (``ref`` = the private URL)."""
        return translate.attachment_refs(files)

    async def fetch_media(self, item: MediaItem, dest_dir: Path, max_bytes: int) -> MediaItem:
        """Stream a private file (bot-token auth) into ``dest_dir``, at most ``max_bytes``."""
        import aiohttp

        url = item.ref
        if not url:
            return item
        name = item.name or "file"
        if item.size and item.size > max_bytes:
            raise MediaTooLarge(f"slack: {name} is {item.size} bytes, over {max_bytes}")
        if not url.startswith(("https://", "http://")) or not translate.token_allowed_for(
            url, self.api_base
        ):
            raise ChannelError(f"slack: refusing to fetch {name} from a non-Slack host")
        safe = translate.safe_file_name(name)
        dest = Path(dest_dir).absolute() / f"slack_{uuid.uuid4().hex[:12]}_{safe}"
        timeout = aiohttp.ClientTimeout(total=_DOWNLOAD_TIMEOUT, sock_connect=20)
        with capped_file(dest, max_bytes, f"slack: downloading {name}") as out:
            async with aiohttp.ClientSession(timeout=timeout) as session:
                headers = {"Authorization": f"Bearer {self.bot_token}"}
                async with session.get(url, headers=headers) as r:
                    if r.status != 200:
                        raise ChannelError(f"slack: downloading {name} answered HTTP {r.status}")
                    ctype = (r.content_type or "").lower()
                    if ctype == "text/html" and not (item.mime or "").lower().startswith(
                        "text/html"
                    ):
                        # Slack answers a login page, not the file, when the token lacks files:read
                        raise ChannelError(
                            f"slack: downloading {name} returned an HTML page "
                            "(does the bot token have the files:read scope?)"
                        )
                    if r.content_length is not None and r.content_length > max_bytes:
                        raise MediaTooLarge(
                            f"slack: {name} is {r.content_length} bytes, over {max_bytes}"
                        )
                    async for chunk in r.content.iter_chunked(64 * 1024):
                        out.write(chunk)
        return dataclasses.replace(item, target=str(dest))

    # ------------------------------------------------------------------ outbound

    def _remember_post(self, ts: str, thread_ts: str | None) -> None:
        if thread_ts:
            self._bot_threads.put(thread_ts)
        elif ts:
            self._bot_roots.put(ts)
            self._bot_threads.put(ts)  # a thread under our own message is one we are in

    async def _post(self, call: ApiCall) -> str:
        resp = await self._web.chat_postMessage(**call.params)
        ts = resp.get("ts") or ""
        self._remember_post(ts, call.params.get("thread_ts"))
        return str(ts)

    async def send(self, msg: OutboundMessage) -> list[str]:
        local = {
            item.target for item in msg.media if not item.is_url and Path(item.target).is_file()
        }
        plan = translate.plan_send(msg, chunk_limit=self.chunk_limit, local_files=local)
        ids: list[str] = []
        errors: list[str] = []
        for call in plan:
            await self._run(call, msg.chat_id, ids, errors)
        if not ids:
            raise ChannelError(
                f"slack: nothing delivered to {msg.chat_id}"
                + (f" ({'; '.join(errors)})" if errors else " (empty message)")
            )
        return ids

    async def _run(self, call: ApiCall, chat_id: str, ids: list[str], errors: list[str]) -> None:
        """Make one planned call, then its fallback when Slack refuses it.  A post that
        fails is recorded in ``errors`` (the rest still goes out)."""
        if call.method == translate.POST:
            await self._run_post(call, chat_id, ids, errors)
            return
        if call.method == translate.DELETE:
            await self._run_delete(call)
            return
        if call.method == translate.UPDATE:
            done = await self._replace_preview(call)
            if done:
                ids.append(call.params["ts"])
        elif call.method == translate.UPLOAD:
            done = await self._run_upload(call, chat_id, ids)
        else:  # pragma: no cover - plan_send plans nothing else
            raise ChannelError(f"slack: no way to run {call.method}")
        if not done:
            for fallback in call.fallback:
                await self._run(fallback, chat_id, ids, errors)

    async def _run_post(
        self, call: ApiCall, chat_id: str, ids: list[str], errors: list[str]
    ) -> None:
        from slack_sdk.errors import SlackApiError

        try:
            ids.append(await self._post(call))
        except SlackApiError as e:
            errors.append(str(e.response.get("error", "") if e.response is not None else e))
            log.warning("slack: chat.postMessage to %s failed: %s", chat_id, errors[-1])
        except Exception as e:
            errors.append(f"{type(e).__name__}: {e}")
            log.warning("slack: chat.postMessage to %s failed: %s", chat_id, errors[-1])

    async def _run_delete(self, call: ApiCall) -> None:
        try:
            await self._web.chat_delete(**call.params)
        except Exception as e:
            log.info("slack: the stale preview %s could not be deleted: %s", call.params["ts"], e)

    async def _run_upload(self, call: ApiCall, chat_id: str, ids: list[str]) -> bool:
        """True when the file went up; False sends the fallback (a note)."""
        try:
            resp = await self._web.files_upload_v2(**call.params)
        except Exception as e:
            log.warning("slack: upload of %s failed: %s", call.params["filename"], e)
            return False
        ids.append(translate.upload_id(resp, chat_id))
        if call.params.get("thread_ts"):
            self._bot_threads.put(call.params["thread_ts"])
        return True

    async def _replace_preview(self, call: ApiCall) -> bool:
        """``chat.update`` the preview into the reply's first chunk.  False when Slack
        refuses (the message is gone, cannot be edited): the fallback deletes the preview
        and posts the chunk as a new message.  Other failures raise (the outbox retries)."""
        from slack_sdk.errors import SlackApiError

        try:
            await self._web.chat_update(**call.params)
            return True
        except SlackApiError as e:
            err = str(e.response.get("error", "") if e.response is not None else e)
            if err in _TRANSIENT:
                raise
            log.info(
                "slack: the preview %s could not be edited (%s); posting anew",
                call.params["ts"],
                err,
            )
        return False

    # ------------------------------------------------------------------ live previews

    async def send_preview(
        self,
        chat_id: str,
        text: str,
        *,
        thread_id: str | None = None,
        reply_to_id: str | None = None,
    ) -> str:
        # in the thread the reply goes to (``send``: thread_id, else reply_to_id)
        call = translate.preview_post(
            chat_id, text, limit=self.chunk_limit, thread_id=thread_id, reply_to_id=reply_to_id
        )
        return await self._post(call)

    async def edit_preview(
        self, chat_id: str, message_id: str, text: str, *, thread_id: str | None = None
    ) -> None:
        call = translate.preview_edit(chat_id, message_id, text, limit=self.chunk_limit)
        await self._web.chat_update(**call.params)

    async def delete_message(
        self, chat_id: str, message_id: str, *, thread_id: str | None = None
    ) -> None:
        await self._web.chat_delete(**translate.delete_call(chat_id, message_id).params)

    async def react(self, chat_id: str, message_id: str, emoji: str) -> None:
        from slack_sdk.errors import SlackApiError

        call = translate.reaction_call(chat_id, message_id, emoji)
        if call is None:
            log.info("slack: no Slack name for reaction %r; skipped", emoji)
            return
        name = call.params["name"]
        try:
            await self._web.reactions_add(**call.params)
        except SlackApiError as e:
            err = e.response.get("error", "") if e.response is not None else str(e)
            if err != "already_reacted":
                log.warning(
                    "slack: reactions.add %s on %s/%s failed: %s", name, chat_id, message_id, err
                )
        except Exception as e:
            log.warning("slack: reactions.add failed: %s", e)
