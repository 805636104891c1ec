"""Slack adapter: slack-bolt ``AsyncApp`` over Socket Mode (default) or the HTTP Events API.

Translation only (see ``channels/base.py``):

* inbound ``message`` (DMs, channels, threads) and ``app_mention`` events become ONE
  ``InboundMessage`` per ``(channel, ts)``: Slack sends both events for a mention and retries
  events it thinks were not acknowledged, so a bounded LRU of delivered keys (plus an
  in-flight table for the two events racing each other) drops the duplicates;
* edits, deletions, joins and other housekeeping subtypes are acknowledged and ignored;
* the app runs with ``process_before_response=True``: the listener awaits the sink (which
  only persists, so it is fast) and only then does bolt acknowledge -- the Socket Mode
  envelope ack, or the HTTP 200.  If the sink raises, bolt answers 500 / does not ack, so
  Slack redelivers.  Slack wants the ack within 3 s.  Inbound files are NOT downloaded here:
  each attachment carries its private URL as ``ref`` and the core calls ``fetch_media`` once
  the sender is admitted (SPEC §9.4), which streams it with the bot token and a size cap;
* ``send`` chunks the Markdown (``bot.replies.chunk_markdown``), renders each chunk to
  mrkdwn (``channels.formatting.markdown_to_slack_mrkdwn``) and posts with ``chat.postMessage``;
  local files go through ``files_upload_v2``; URLs are sent as ``<url|name>`` links;
* 429 responses are retried after ``Retry-After`` by a retry handler on the web client.

Threading decision: Slack cannot thread "only the first chunk" coherently -- the rest of the
reply would land in the channel, detached from the part in the thread.  So when a reply is
threaded at all (``thread_id`` set, or ``reply_to_id`` set with any ``reply_mode``), every
chunk and attachment of that ``OutboundMessage`` goes to the same thread.  ``thread_id`` wins
over ``reply_to_id`` (Slack threads do not nest).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import mimetypes
import re
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from channels.base import (
    Capabilities,
    Channel,
    ChannelError,
    ChatType,
    InboundMessage,
    InboundSink,
    MediaItem,
    MediaKind,
    MediaTooLarge,
    OutboundMessage,
)
from channels.formatting import markdown_to_slack_mrkdwn, slack_escape, slack_link
from channels.util import BoundedLRU, capped_file, parse_listen

log = logging.getLogger("chela.channels.slack")

SLACK_HARD_LIMIT = 40000
_ALLOWED_SUBTYPES = {None, "", "file_share", "thread_broadcast", "bot_message", "me_message"}
_DOWNLOAD_TIMEOUT = 120.0  # whole-file limit for one inbound download

# A few unicode emoji the core uses, mapped to Slack's short names.
EMOJI_NAMES: dict[str, str] = {
    "👀": "eyes",
    "✅": "white_check_mark",
    "✔": "heavy_check_mark",
    "👍": "thumbsup",
    "👎": "thumbsdown",
    "❤": "heart",
    "🔥": "fire",
    "🎉": "tada",
    "😂": "joy",
    "🤔": "thinking_face",
    "❌": "x",
    "⚠": "warning",
    "🙏": "pray",
    "💯": "100",
    "⏳": "hourglass_flowing_sand",
    "⌛": "hourglass",
    "🤖": "robot_face",
    "👋": "wave",
    "🚀": "rocket",
    "💡": "bulb",
    "🧠": "brain",
    "✍": "writing_hand",
    "👌": "ok_hand",
    "⚡": "zap",
    "🙂": "slightly_smiling_face",
    "😊": "blush",
    "😢": "cry",
    "🆗": "ok",
    "📝": "memo",
    "🔍": "mag",
}


def slack_emoji_name(emoji: str) -> str:
    """``👀`` → ``eyes``; ``:eyes:`` → ``eyes``; unknown unicode is returned stripped."""
    e = (emoji or "").strip()
    base = e.replace("\ufe0f", "").replace("\ufe0e", "")
    if base in EMOJI_NAMES:
        return EMOJI_NAMES[base]
    return e.strip(":").strip()


def _media_kind(file: dict) -> MediaKind:
    mime = (file.get("mimetype") or "").lower()
    if file.get("subtype") == "slack_audio":
        return "voice"
    if mime.startswith("image/"):
        return "image"
    if mime.startswith("video/"):
        return "video"
    if mime.startswith("audio/"):
        return "audio"
    return "document"


_SAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")


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
        self._identity: dict = {}
        self._bot_user_id = ""
        self._bot_id = ""
        self._app: Any = None  # slack_bolt AsyncApp once started
        self._socket_handler: Any = None
        self._http_runner: Any = None
        self.http_address: tuple[str, int] | None = None  # bound (host, port) in HTTP mode

        self._seen = BoundedLRU(5000)  # (channel, ts) already handed to the sink
        self._inflight: dict[tuple[str, str], asyncio.Future] = {}
        self._sink_lock = asyncio.Lock()
        self._bot_threads = BoundedLRU(2000)  # thread roots the bot posted in (or started)
        self._bot_roots = BoundedLRU(2000)  # ts of the bot's own top-level messages
        self._started = False

    # ------------------------------------------------------------------ plumbing

    def _make_web_client(self, token: str | None):
        from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler
        from slack_sdk.web.async_client import AsyncWebClient

        max_wait = self.max_retry_after

        class _RetryAfter(AsyncRateLimitErrorRetryHandler):
            """Honour ``Retry-After`` exactly (the SDK's handler adds up to 1 s of jitter)."""

            async def prepare_for_next_attempt_async(
                self, *, state, request, response=None, error=None
            ):
                if response is None:
                    raise error
                delay = 1.0
                for k, v in response.headers.items():
                    if k.lower() == "retry-after":
                        try:
                            delay = float(v[0] if isinstance(v, list) else v)
                        except (TypeError, ValueError):
                            delay = 1.0
                        break
                delay = max(0.0, min(delay, max_wait))
                log.info("slack: rate limited (%s); retrying in %.1fs", request.url, delay)
                state.next_attempt_requested = True
                await asyncio.sleep(delay)
                state.increment_current_attempt()

        from slack_sdk.http_retry.builtin_async_handlers import AsyncConnectionErrorRetryHandler

        return AsyncWebClient(
            token=token,
            base_url=self.api_base,
            retry_handlers=[AsyncConnectionErrorRetryHandler(), _RetryAfter(max_retry_count=3)],
        )

    @property
    def bot_identity(self) -> dict:
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
        self._app = self._build_app(auth)
        try:
            if self.mode == "socket":
                await self._start_socket()
            else:
                await self._start_http()
        except BaseException:
            await self._teardown()
            raise
        self._started = True
        log.info(
            "slack: connected as %s (%s) via %s mode",
            self._identity.get("username"),
            self._bot_user_id,
            self.mode,
        )

    async def open_for_sending(self) -> None:
        """Web API only (no Socket Mode, no HTTP endpoint)."""
        if not self.bot_token:
            raise ChannelError("slack: no bot token configured (bot_token_env)")
        await self._auth()
        log.info("slack: authenticated as %s for sending only", self._identity.get("username"))

    async def _auth(self) -> dict:
        """auth.test: checks the bot token and learns who we are."""
        from slack_sdk.errors import SlackApiError

        try:
            auth = await self._web.auth_test()
        except SlackApiError as e:
            err = e.response.get("error", "") if e.response is not None else ""
            raise ChannelError(f"slack: auth.test failed ({err or e}); check the bot token") from e
        except Exception as e:  # aiohttp.ClientError, OSError, timeouts
            raise ChannelError(
                f"slack: cannot reach {self.api_base} ({type(e).__name__}: {e})"
            ) from e
        self._bot_user_id = auth.get("user_id") or ""
        self._bot_id = auth.get("bot_id") or ""
        self._identity = {
            "id": self._bot_user_id,
            "username": auth.get("user") or "",
            "bot_id": self._bot_id,
            "team_id": auth.get("team_id") or "",
            "team": auth.get("team") or "",
        }
        return auth

    async def stop(self) -> None:
        self._started = False
        await self._teardown()

    async def _teardown(self) -> None:
        handler, self._socket_handler = self._socket_handler, None
        if handler is not None:
            try:
                await handler.client.close()
            except Exception:  # pragma: no cover - best effort
                log.debug("slack: socket close failed", exc_info=True)
        runner, self._http_runner = self._http_runner, None
        if runner is not None:
            try:
                await runner.cleanup()
            except Exception:  # pragma: no cover
                log.debug("slack: http runner cleanup failed", exc_info=True)
        self.http_address = None

    def _build_app(self, auth):
        from slack_bolt.async_app import AsyncApp
        from slack_bolt.authorization import AuthorizeResult

        result = AuthorizeResult(
            enterprise_id=auth.get("enterprise_id"),
            team_id=auth.get("team_id"),
            team=auth.get("team"),
            url=auth.get("url"),
            bot_user_id=self._bot_user_id,
            bot_id=self._bot_id,
            bot_token=self.bot_token,
        )

        async def authorize(**_kwargs):
            # The bot token was verified by auth.test at start; no per-event auth.test call
            # (a failing one would make bolt ack an event without running our listener).
            return result

        app = AsyncApp(
            name="chela-slack",
            logger=logging.getLogger("chela.channels.slack.bolt"),
            client=self._make_web_client(None),
            signing_secret=self.signing_secret,
            authorize=authorize,
            process_before_response=True,
            request_verification_enabled=(self.mode == "http"),
        )

        async def on_event(body, event):
            await self._handle_event(body, event)

        async def on_other(body):
            return None  # acknowledged, ignored (reactions, joins, …)

        app.event("message")(on_event)
        app.event("app_mention")(on_event)
        app.event(re.compile(".*"))(on_other)
        return app

    async def _start_socket(self) -> None:
        from slack_bolt.adapter.socket_mode.aiohttp import AsyncSocketModeHandler
        from slack_sdk.errors import SlackApiError

        handler = AsyncSocketModeHandler(
            self._app,
            self.app_token,
            web_client=self._make_web_client(None),
            logger=logging.getLogger("chela.channels.slack.socket"),
        )
        self._socket_handler = handler
        client = handler.client
        try:
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

    async def _start_http(self) -> None:
        from aiohttp import web
        from slack_bolt.adapter.aiohttp import to_aiohttp_response, to_bolt_request

        app = self._app

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
        self._http_runner = runner
        try:
            site = web.TCPSite(runner, host, port)
            await site.start()
        except OSError as e:
            raise ChannelError(f"slack: cannot listen on {self.listen} ({e})") from e
        addr = runner.addresses[0] if runner.addresses else (host, port)
        self.http_address = (addr[0], addr[1])

    @property
    def http_url(self) -> str:
        """``http://host:port/slack/events`` once the HTTP server runs (handy for tests)."""
        if not self.http_address:
            return ""
        return f"http://{self.http_address[0]}:{self.http_address[1]}/slack/events"

    # ------------------------------------------------------------------ inbound

    async def _handle_event(self, body: dict, event: dict) -> None:
        msg = self._translate(body, event)
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
        fut: asyncio.Future = asyncio.get_running_loop().create_future()
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

    def _translate(self, body: dict, event: dict) -> InboundMessage | None:
        etype = event.get("type")
        subtype = event.get("subtype")
        if etype not in ("message", "app_mention"):
            return None
        if etype == "message" and subtype not in _ALLOWED_SUBTYPES:
            return None
        channel = event.get("channel") or ""
        ts = event.get("ts") or ""
        if not channel or not ts:
            return None
        user = event.get("user") or ""
        bot_id = event.get("bot_id") or ""
        sender_is_bot = (
            bool(bot_id) or subtype == "bot_message" or (bool(user) and user == self._bot_user_id)
        )
        text = event.get("text") or ""
        thread_ts = event.get("thread_ts") or ""
        thread_id = thread_ts if thread_ts and thread_ts != ts else None

        channel_type = event.get("channel_type") or ("im" if channel.startswith("D") else "channel")
        chat_type: ChatType = "direct" if channel_type == "im" else "group"

        bot = self._bot_user_id
        mentioned = (
            etype == "app_mention"
            or (bool(bot) and (f"<@{bot}>" in text or f"<@{bot}|" in text))
            or (thread_id is not None and thread_id in self._bot_threads)
        )
        profile = event.get("user_profile") or {}
        sender_name = (
            profile.get("display_name") or profile.get("real_name") or event.get("username") or ""
        )
        sender_username = profile.get("name") or ""
        try:
            timestamp = float(ts)
        except ValueError:
            timestamp = time.time()

        attachments = self._attachments(event.get("files") or [])
        return InboundMessage(
            channel=self.name,
            chat_id=channel,
            sender_id=user or bot_id,
            text=self._clean_text(text),
            message_id=ts,
            chat_type=chat_type,
            account=self.account,
            thread_id=thread_id,
            sender_name=sender_name,
            sender_username=sender_username,
            reply_to_id=thread_id,
            reply_to_bot=thread_id is not None and thread_id in self._bot_roots,
            mentioned=mentioned,
            sender_is_bot=sender_is_bot,
            attachments=attachments,
            timestamp=timestamp,
            group_kind="channel",
            # Stable across app_mention/message and across retries (event ids differ), so the
            # core's de-dup also holds after a restart.
            raw_id=f"{channel}:{ts}",
        )

    def _clean_text(self, text: str) -> str:
        """Slack escapes ``& < >``; the bot's own mention becomes ``@<bot name>``."""
        bot = self._bot_user_id
        name = self._identity.get("username") or "bot"
        if bot:
            text = re.sub(rf"<@{re.escape(bot)}(?:\|[^>]*)?>", f"@{name}", text)
        return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")

    def _token_allowed_for(self, url: str) -> bool:
        """Only send the bot token to Slack's file hosts or the configured API host."""
        host = (urlparse(url).hostname or "").lower()
        api_host = (urlparse(self.api_base).hostname or "").lower()
        return host in (api_host, "slack.com") or host.endswith(".slack.com")

    @staticmethod
    def _attachments(files: list) -> list[MediaItem]:
        """Event files as not-yet-downloaded attachments (``ref`` = the private URL)."""
        items: list[MediaItem] = []
        for f in files:
            if not isinstance(f, dict):
                continue
            url = f.get("url_private_download") or f.get("url_private") or ""
            if not url:
                continue  # tombstoned / external files: nothing to fetch
            name = f.get("name") or f.get("title") or f.get("id") or "file"
            try:
                size = max(0, int(f.get("size") or 0))
            except (TypeError, ValueError):
                size = 0
            items.append(
                MediaItem(
                    kind=_media_kind(f),
                    target="",
                    name=name,
                    mime=f.get("mimetype") or mimetypes.guess_type(name)[0] or "",
                    ref=url,
                    size=size,
                )
            )
        return items

    async def fetch_media(self, item: MediaItem, dest_dir: Path, max_bytes: int) -> MediaItem:
        """Stream a private file (bot-token auth) into ``dest_dir``, at most ``max_bytes``."""
        import aiohttp

        url = item.ref
        if not url:
            return item
        name = item.name or "file"
        if item.size and item.size > max_bytes:
            raise MediaTooLarge(f"slack: {name} is {item.size} bytes, over {max_bytes}")
        if not url.startswith(("https://", "http://")) or not self._token_allowed_for(url):
            raise ChannelError(f"slack: refusing to fetch {name} from a non-Slack host")
        safe = _SAFE_NAME.sub("_", Path(name).name).strip("._")[:80] or "file"
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

    def _render(self, text: str) -> list[str]:
        """Markdown → mrkdwn posts, each within the chunk limit after escaping."""
        from channels.chunking import chunk_rendered

        text = (text or "").strip()
        if not text:
            return []
        return [
            r for r in chunk_rendered(text, self.chunk_limit, markdown_to_slack_mrkdwn) if r.strip()
        ]

    def _remember_post(self, ts: str, thread_ts: str | None) -> None:
        if thread_ts:
            self._bot_threads.put(thread_ts)
        elif ts:
            self._bot_roots.put(ts)
            self._bot_threads.put(ts)  # a thread under our own message is one we are in

    async def _post(self, chat_id: str, text: str, thread_ts: str | None) -> str:
        kwargs: dict[str, Any] = {"channel": chat_id, "text": text, "mrkdwn": True}
        if thread_ts:
            kwargs["thread_ts"] = thread_ts
        resp = await self._web.chat_postMessage(**kwargs)
        ts = resp.get("ts") or ""
        self._remember_post(ts, thread_ts)
        return ts

    async def send(self, msg: OutboundMessage) -> list[str]:
        from slack_sdk.errors import SlackApiError

        thread_ts = msg.thread_id or msg.reply_to_id or None
        ids: list[str] = []
        errors: list[str] = []

        async def post_text(text: str) -> None:
            try:
                ids.append(await self._post(msg.chat_id, text, thread_ts))
            except SlackApiError as e:
                errors.append(str(e.response.get("error", "") if e.response is not None else e))
                log.warning("slack: chat.postMessage to %s failed: %s", msg.chat_id, errors[-1])
            except Exception as e:
                errors.append(f"{type(e).__name__}: {e}")
                log.warning("slack: chat.postMessage to %s failed: %s", msg.chat_id, errors[-1])

        preview = msg.edit_id  # a live preview the first chunk replaces (SPEC §12)
        for chunk in self._render(msg.text):
            if preview:
                target, preview = preview, ""
                if await self._replace_preview(msg.chat_id, target, chunk):
                    ids.append(target)
                    continue
            await post_text(chunk)

        for item in msg.media:
            name = (
                item.name
                or (
                    Path(urlparse(item.target).path).name if item.is_url else Path(item.target).name
                )
                or "attachment"
            )
            if item.is_url:
                label = {
                    "image": "Image",
                    "video": "Video",
                    "audio": "Audio",
                    "voice": "Audio",
                }.get(item.kind, "File")
                await post_text(f"{label}: {slack_link(item.target, name)}")
                continue
            path = Path(item.target)
            if not path.is_file():
                await post_text(f"[attachment unavailable: {slack_escape(name)}]")
                continue
            try:
                resp = await self._web.files_upload_v2(
                    channel=msg.chat_id,
                    file=str(path),
                    filename=name,
                    title=name,
                    thread_ts=thread_ts or None,
                )
            except Exception as e:
                log.warning("slack: upload of %s failed: %s", name, e)
                await post_text(f"[attachment unavailable: {slack_escape(name)}]")
                continue
            ids.append(self._upload_id(resp, msg.chat_id))
            if thread_ts:
                self._bot_threads.put(thread_ts)

        if not ids:
            raise ChannelError(
                f"slack: nothing delivered to {msg.chat_id}"
                + (f" ({'; '.join(errors)})" if errors else " (empty message)")
            )
        return ids

    # ------------------------------------------------------------------ live previews
    def _preview_text(self, text: str) -> str:
        try:
            rendered = markdown_to_slack_mrkdwn(text)
        except Exception:
            rendered = slack_escape(text)
        return rendered[: self.chunk_limit]

    async def send_preview(
        self,
        chat_id: str,
        text: str,
        *,
        thread_id: str | None = None,
        reply_to_id: str | None = None,
    ) -> str:
        # in the thread the reply goes to (``send``: thread_id, else reply_to_id)
        return await self._post(chat_id, self._preview_text(text), thread_id or reply_to_id)

    async def edit_preview(
        self, chat_id: str, message_id: str, text: str, *, thread_id: str | None = None
    ) -> None:
        await self._web.chat_update(channel=chat_id, ts=message_id, text=self._preview_text(text))

    async def delete_message(
        self, chat_id: str, message_id: str, *, thread_id: str | None = None
    ) -> None:
        await self._web.chat_delete(channel=chat_id, ts=message_id)

    async def _replace_preview(self, chat_id: str, ts: str, chunk: str) -> bool:
        """``chat.update`` the preview into the reply's first chunk.  False when Slack
        refuses (the message is gone, cannot be edited): the preview is deleted and the
        chunk goes out as a new message.  Other failures raise (the outbox retries)."""
        from slack_sdk.errors import SlackApiError

        try:
            await self._web.chat_update(channel=chat_id, ts=ts, text=chunk)
            return True
        except SlackApiError as e:
            err = str(e.response.get("error", "") if e.response is not None else e)
            if err in ("ratelimited", "fatal_error", "internal_error", "request_timeout"):
                raise
            log.info("slack: the preview %s could not be edited (%s); posting anew", ts, err)
        try:
            await self._web.chat_delete(channel=chat_id, ts=ts)
        except Exception as e:
            log.info("slack: the stale preview %s could not be deleted: %s", ts, e)
        return False

    @staticmethod
    def _upload_id(resp, chat_id: str) -> str:
        """The share's message ts when Slack reports it, else the file id."""
        files = resp.get("files") or ([resp.get("file")] if resp.get("file") else [])
        for f in files:
            shares = (f or {}).get("shares") or {}
            for scope in ("public", "private"):
                for share in (shares.get(scope) or {}).get(chat_id) or []:
                    if share.get("ts"):
                        return share["ts"]
            if f and f.get("id"):
                return f["id"]
        return ""

    async def react(self, chat_id: str, message_id: str, emoji: str) -> None:
        from slack_sdk.errors import SlackApiError

        name = slack_emoji_name(emoji)
        if not name or not re.fullmatch(r"[\w+\-']+", name):
            log.info("slack: no Slack name for reaction %r; skipped", emoji)
            return
        try:
            await self._web.reactions_add(channel=chat_id, timestamp=message_id, name=name)
        except SlackApiError as e:
            err = e.response.get("error", "") if e.response is not None else str(e)
            if err != "already_reacted":
                log.warning(
                    "slack: reactions.add %s on %s/%s failed: %s", name, chat_id, message_id, err
                )
        except Exception as e:
            log.warning("slack: reactions.add failed: %s", e)
