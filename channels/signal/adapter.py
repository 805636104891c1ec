"""Signal adapter for ``signal-cli daemon --http``: wires the transport to the translators
and keeps the channel's state.

Transport (signal-cli-jsonrpc(5)):

* ``POST /api/v1/rpc``   JSON-RPC 2.0 — ``send``, ``sendTyping``, ``sendReaction``, ``version``
  (``rpc.py``).
* ``GET  /api/v1/events`` Server-Sent Events (parsed by ``sse.py``); every event's ``data`` is
  a JSON object ``{"envelope": {...}, "account": "+1555..."}``.  Recent signal-cli versions
  give each event an ``id`` and replay the events after ``Last-Event-ID`` on reconnect (all
  kept events when the id is unknown), so replays are expected and de-duplicated here by
  ``(source, timestamp)``.
* ``GET  /api/v1/check``  200 when the daemon runs (used by ``start``).

Translation (envelope → ``InboundMessage``, ``OutboundMessage`` → ``send`` params, chat ids,
quotes, mentions, styles) is pure and lives in ``translate.py``; this module keeps what it
needs between calls: the bot's service id once learned, the kinds of chats seen, who wrote
the messages seen and sent (bounded), the timestamps of sent messages, whether signal-cli
accepts text styles, the de-duplication set and the event stream's reconnects.

Inbound attachments: signal-cli has already stored them in its attachments directory.  At
intake an attachment only carries that location as ``ref`` (nothing is read or copied); the
core calls ``fetch_media`` once the sender is admitted, which copies the file into
the core's media directory with a size cap (``media.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
from pathlib import Path
from typing import Any

import aiohttp
from yarl import URL

from channels.base import (
    Capabilities,
    Channel,
    ChannelError,
    InboundMessage,
    InboundSink,
    MediaItem,
    OutboundMessage,
)
from channels.signal import media, translate
from channels.signal.rpc import RpcClient, RpcError
from channels.signal.sse import SSEEvent, SSEParser
from channels.retry import Backoff
from channels.util import BoundedLRU

log = logging.getLogger(__name__)

DEFAULT_ATTACHMENTS_DIR = "~/.local/share/signal-cli/attachments"


class SignalChannel(Channel):
    name = "signal"
    capabilities = Capabilities(reactions=True, media=True, typing=True, max_text=4000)

    def __init__(
        self,
        *,
        account: str,
        http_url: str = "http://127.0.0.1:8080",
        account_name: str = "default",
        media_dir: Path | str | None = None,
        chunk_limit: int = 4000,
        attachments_dir: str = "",
        account_uuid: str = "",
        reconnect_initial: float = 1.0,
        reconnect_max: float = 60.0,
        idle_timeout: float | None = 90.0,
        connect_timeout: float = 10.0,
        rpc_timeout: float = 60.0,
        rpc_retry_delay: float = 1.0,
        max_retry_after: float = 30.0,
        rpc_account: bool = True,
        dedupe_size: int = 4096,
        memory_size: int = 10000,
    ) -> None:
        if not account:
            raise ValueError("signal: account (the bot's number) is required")
        self.account = account
        self.account_uuid = account_uuid
        self.http_url = http_url.rstrip("/")
        self.account_name = account_name
        self.media_dir = Path(media_dir).expanduser() if media_dir else None
        self.chunk_limit = (
            min(int(chunk_limit), self.capabilities.max_text) if chunk_limit else 4000
        )
        self.attachments_dir = Path(os.path.expanduser(attachments_dir or DEFAULT_ATTACHMENTS_DIR))
        self.reconnect_initial = reconnect_initial
        self.reconnect_max = reconnect_max
        self.idle_timeout = idle_timeout
        self.connect_timeout = connect_timeout
        self._rpc_client = RpcClient(
            self.http_url,
            account=account if rpc_account else "",
            timeout=rpc_timeout,
            connect_timeout=connect_timeout,
            retry_delay=rpc_retry_delay,
            max_retry_after=max_retry_after,
        )

        self._sink: InboundSink | None = None
        self._task: asyncio.Task[None] | None = None
        self._resp: aiohttp.ClientResponse | None = None
        self._running = False
        self._last_event_id: str | None = None
        self._seen = BoundedLRU(dedupe_size)  # (source, timestamp) already delivered
        self._authors = BoundedLRU(memory_size)  # (chat_id, message_id) -> (author, text snippet)
        self._chat_kinds = BoundedLRU(memory_size)  # chat_id -> "group" | "direct"
        self._own_sent = BoundedLRU(memory_size)  # timestamps of messages we sent
        self._text_styles = True  # until signal-cli refuses them
        self.connects = 0  # successful events-stream connections
        self._stream_got_data = False  # the current events stream delivered bytes

    # ------------------------------------------------------------------ lifecycle

    @property
    def bot_identity(self) -> dict[str, Any]:
        return {"id": self.account, "username": self.account, "uuid": self.account_uuid}

    @property
    def _me(self) -> translate.Me:
        return translate.Me(self.account, self.account_uuid)

    def _unreachable(self, err: object) -> ChannelError:
        return ChannelError(
            f"signal-cli daemon not reachable at {self.http_url} ({err}); start it with "
            f"`signal-cli -a {self.account} daemon --http {self._host_port()}`"
        )

    def _host_port(self) -> str:
        u = URL(self.http_url)
        return f"{u.host or '127.0.0.1'}:{u.port or 8080}"

    async def start(self, sink: InboundSink) -> None:
        if self._task is not None and not self._task.done():
            return
        self._sink = sink
        self._rpc_client.session()
        try:
            await self._check_daemon()
            resp = await self._open_events()
        except ChannelError:
            await self._rpc_client.close()
            raise
        except (TimeoutError, aiohttp.ClientError, OSError) as e:
            await self._rpc_client.close()
            raise self._unreachable(e) from e
        self._running = True
        self.connects += 1
        log.info("signal: connected to signal-cli at %s as %s", self.http_url, self.account)
        self._resp = resp
        self._task = asyncio.create_task(self._run(resp), name=f"signal-events-{self.account_name}")

    async def open_for_sending(self) -> None:
        """JSON-RPC only (no event stream): check that the daemon answers."""
        self._rpc_client.session()
        try:
            await self._check_daemon()
        except ChannelError:
            await self._rpc_client.close()
            raise
        log.info(
            "signal: connected to signal-cli at %s as %s for sending only",
            self.http_url,
            self.account,
        )

    async def stop(self) -> None:
        self._running = False
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        resp, self._resp = self._resp, None
        if resp is not None:
            resp.close()  # the task may have been cancelled before it ever ran
        await self._rpc_client.close()

    async def _check_daemon(self) -> None:
        session = self._rpc_client.session()
        timeout = aiohttp.ClientTimeout(total=self.connect_timeout)
        try:
            async with session.get(f"{self.http_url}/api/v1/check", timeout=timeout) as resp:
                status = resp.status
                await resp.read()
        except (TimeoutError, aiohttp.ClientError, OSError) as e:
            raise self._unreachable(e) from e
        if status == 200:
            return
        if status == 404:  # older signal-cli without /check: any JSON-RPC answer will do
            try:
                await self._rpc_client.call_once("version", {})
                return
            except RpcError as e:
                raise self._unreachable(e) from e
        raise self._unreachable(f"HTTP {status} from /api/v1/check")

    # ------------------------------------------------------------------ events stream

    async def _open_events(self) -> aiohttp.ClientResponse:
        session = self._rpc_client.session()
        headers = {"Accept": "text/event-stream", "Cache-Control": "no-cache"}
        if self._last_event_id:
            headers["Last-Event-ID"] = self._last_event_id
        timeout = aiohttp.ClientTimeout(total=None, connect=self.connect_timeout, sock_read=None)
        resp = await session.get(
            f"{self.http_url}/api/v1/events",
            params={"account": self.account},
            headers=headers,
            timeout=timeout,
        )
        if resp.status != 200:
            body = (await resp.text(errors="replace"))[:200]
            resp.release()
            raise ChannelError(f"signal-cli events endpoint returned HTTP {resp.status}: {body}")
        return resp

    async def _run(self, resp: aiohttp.ClientResponse | None) -> None:
        backoff = Backoff(self.reconnect_initial, self.reconnect_max)
        while self._running:
            if resp is None:
                try:
                    resp = await self._open_events()
                except asyncio.CancelledError:
                    raise
                except Exception as e:
                    log.warning(
                        "signal: events stream connect to %s failed (%s); retrying in %.1fs",
                        self.http_url,
                        e,
                        backoff.peek(),
                    )
                    await asyncio.sleep(backoff.next())
                    continue
                self.connects += 1
                self._resp = resp
                log.info("signal: events stream reconnected (%s)", self.http_url)
            got_data = False
            self._stream_got_data = False
            try:
                got_data = await self._read_stream(resp)
                reason = "closed by the daemon"
            except asyncio.CancelledError:
                resp.close()
                raise
            except _Stalled:
                reason = f"silent for {self.idle_timeout:g}s (no keep-alive)"
                got_data = True
            except Exception as e:
                reason = f"failed ({type(e).__name__}: {e})"
                # a stream that delivered data and then broke was healthy: reset the backoff
                got_data = self._stream_got_data
            finally:
                resp.close()
            resp = self._resp = None
            if not self._running:
                break
            if got_data:
                backoff.reset()
            log.warning("signal: events stream %s; reconnecting in %.1fs", reason, backoff.peek())
            await asyncio.sleep(backoff.next())

    async def _read_stream(self, resp: aiohttp.ClientResponse) -> bool:
        parser = SSEParser()
        got_data = False
        while True:
            try:
                if self.idle_timeout:
                    async with asyncio.timeout(self.idle_timeout):
                        chunk = await resp.content.readany()
                else:
                    chunk = await resp.content.readany()
            except TimeoutError:
                raise _Stalled() from None
            if not chunk:
                return got_data
            got_data = self._stream_got_data = True
            for ev in parser.feed(chunk):
                try:
                    await self._handle_event(ev)
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.exception("signal: could not handle event %s: %.300r", ev.id, ev.data)
                if ev.id is not None:
                    self._last_event_id = ev.id

    async def _handle_event(self, ev: SSEEvent) -> None:
        if ev.event not in ("message", "receive"):
            log.debug("signal: ignoring SSE event %r", ev.event)
            return
        try:
            decoded = json.loads(ev.data)
        except ValueError:
            log.warning("signal: undecodable event data: %.200r", ev.data)
            return
        payload = translate.unwrap_event(decoded)
        if payload is None:
            return
        if payload.get("exception") and "envelope" not in payload:
            log.warning("signal: daemon reported %s", payload.get("exception"))
            return
        envelope = translate.envelope_for(payload, self._me)
        if envelope is not None:
            await self._handle_envelope(envelope)

    async def _handle_envelope(self, env: dict[str, Any]) -> None:
        key = translate.dedupe_key(env)
        if key in self._seen:
            log.debug("signal: duplicate envelope %s ignored", key)
            return
        msg = self._intake(env)
        if msg is None:
            return
        sink = self._sink
        if sink is None:
            return
        for attempt in range(3):
            try:
                await sink(msg)
                break
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception(
                    "signal: inbound sink failed for %s (attempt %d)", msg.raw_id, attempt + 1
                )
                if attempt == 2:
                    return
                await asyncio.sleep(0.5 * (attempt + 1))
        self._seen.put(key)

    def _intake(self, env: dict[str, Any]) -> InboundMessage | None:
        """Translate an envelope and keep what it teaches: the bot's own service id, the
        chat's kind and the message's author."""
        msg = translate.inbound_message(
            env, me=self._me, own_sent=self._own_sent, account_name=self.account_name
        )
        if msg is None:
            return None
        if not self.account_uuid:
            self.account_uuid = translate.own_uuid_in(env, self.account)
        self._chat_kinds.put(msg.chat_id, msg.chat_type)
        self._remember(msg.chat_id, msg.message_id, msg.sender_id, msg.text)
        return msg

    def _remember(self, chat_id: str, message_id: str, author: str, text: str = "") -> None:
        self._authors.put((chat_id, message_id), (author, text[:200]))
        self._authors.put(("", message_id), (author, text[:200]))

    # ------------------------------------------------------------------ attachments

    async def fetch_media(self, item: MediaItem, dest_dir: Path, max_bytes: int) -> MediaItem:
        """Copy signal-cli's stored file into ``dest_dir`` (mode 0600), at most ``max_bytes``."""
        return await media.fetch_media(self.attachments_dir, item, dest_dir, max_bytes)

    # ------------------------------------------------------------------ outbound

    async def send(self, msg: OutboundMessage) -> list[str]:
        local_files = {
            item.target
            for item in msg.media
            if not item.is_url and Path(item.target).is_absolute() and Path(item.target).is_file()
        }
        plan = translate.plan_send(
            msg,
            me=self._me,
            chunk_limit=self.chunk_limit,
            text_styles=self._text_styles,
            chat_kinds=self._chat_kinds,
            authors=self._authors,
            own_sent=self._own_sent,
            local_files=local_files,
        )
        if msg.reply_to_id and plan.quote is None and plan.sends:
            log.log(
                logging.DEBUG if translate.as_timestamp(msg.reply_to_id) is None else logging.INFO,
                "signal: cannot quote message %r in %s (not a Signal timestamp, or its author "
                "in the group is unknown); sending without quote",
                msg.reply_to_id,
                plan.chat_id,
            )
        ids: list[str] = []
        for i, params in enumerate(plan.sends):
            try:
                result = await self._send_styled(params)
            except ChannelError:
                if not ids:
                    raise
                log.exception(
                    "signal: chunk %d/%d to %s failed; continuing",
                    i + 1,
                    len(plan.sends),
                    plan.chat_id,
                )
                continue
            ts = result.get("timestamp") if isinstance(result, dict) else None
            if ts is not None:
                ids.append(str(ts))
                self._own_sent.put(int(ts))
                self._remember(plan.chat_id, str(ts), self.account, params.get("message", ""))
        return ids

    async def _send_styled(self, params: dict[str, Any]) -> Any:
        """``send`` with its text styles; if signal-cli refuses the call with them (versions
        before text styles), send again without and stop using them."""
        plain = {k: v for k, v in params.items() if k != "textStyle"}
        if "textStyle" not in params or not self._text_styles:
            return await self._rpc("send", plain)
        try:
            return await self._rpc("send", params)
        except ChannelError as styled_error:
            refused = styled_error.__cause__
            if not isinstance(refused, RpcError) or refused.code is None:
                raise  # no JSON-RPC answer (transport, HTTP): not the styles' fault
            result = await self._rpc("send", plain)
            self._text_styles = False
            log.warning(
                "signal: signal-cli refused text styles (%s); sending plain text from now on",
                styled_error,
            )
            return result

    async def typing(self, chat_id: str, thread_id: str | None = None) -> None:
        _, target = translate.send_target(chat_id, self._chat_kinds)
        try:
            await self._rpc("sendTyping", target, retries=0)
        except ChannelError as e:
            log.debug("signal: sendTyping failed: %s", e)

    async def react(self, chat_id: str, message_id: str, emoji: str) -> None:
        params = translate.reaction_params(
            chat_id,
            message_id,
            emoji,
            me=self._me,
            chat_kinds=self._chat_kinds,
            authors=self._authors,
            own_sent=self._own_sent,
        )
        await self._rpc("sendReaction", params)

    async def _rpc(self, method: str, params: dict[str, Any], *, retries: int = 1) -> Any:
        try:
            return await self._rpc_client.call(method, params, retries=retries)
        except RpcError as e:
            raise ChannelError(f"signal-cli {method} failed: {e}") from e


class _Stalled(Exception):
    """No bytes (not even a keep-alive) within ``idle_timeout``."""
