"""A wire-level fake of ``signal-cli daemon --http`` on 127.0.0.1 (aiohttp).

    fake = await FakeSignalCli(account="+15550000000").start()
    ch = SignalChannel(account=fake.account, http_url=fake.url, attachments_dir=str(fake.attachments_dir), ...)
    env = fake.inject_message("+15550001", "hi")               # pushed to SSE clients (queued if none)
    await fake.wait_for_sent(1); fake.sent[0]["message"]       # what the adapter sent
    fake.drop_streams(); await fake.wait_for_clients(1)         # abrupt disconnect, wait for reconnect
    fake.fail_rpc_next(status=500)                              # next RPC answers HTTP 500
    await fake.stop()

Endpoints: ``POST /api/v1/rpc`` (``send``, ``sendTyping``, ``sendReaction``, ``version``;
anything else → JSON-RPC -32601), ``GET /api/v1/events`` (SSE, ``id``/``event:receive``/
``data:`` frames, ``:`` keep-alive comments, ``Last-Event-ID`` replay of the last 1000
events, all of them when the id is unknown), ``GET /api/v1/check``.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import shutil
import tempfile
import time
import uuid as uuidlib
from pathlib import Path
from typing import Any

from aiohttp import web

_CLOSE = object()


def _uuid_for(source: str) -> str:
    return str(uuidlib.uuid5(uuidlib.NAMESPACE_URL, "signal:" + source))


def _utf16_len(text: str) -> int:
    return sum(2 if ord(c) > 0xFFFF else 1 for c in text)


class _Client:
    def __init__(self, request: web.Request, query: dict, last_event_id: str | None) -> None:
        self.request = request
        self.query = query
        self.last_event_id = last_event_id
        self.queue: asyncio.Queue = asyncio.Queue()


class FakeSignalCli:
    def __init__(
        self, account: str = "+15550000000", *, keepalive: float = 0.5, history: int = 1000
    ) -> None:
        self.account = account
        self.account_uuid = _uuid_for(account)
        self.keepalive = keepalive
        self.history_size = history
        self.rpc_calls: list[tuple[str, dict]] = []
        self.sent: list[dict] = []  # params of successful ``send`` calls + "timestamp"
        self.events_requests: list[
            dict
        ] = []  # {"query": ..., "last_event_id": ...} per SSE connect
        self.check_calls = 0
        self.attachments_dir = Path(tempfile.mkdtemp(prefix="fake-signal-attachments-"))
        self.url = ""
        self._clients: set[_Client] = set()
        self._pending: list[tuple[str, str]] = []  # (event id, data) queued while nobody listens
        self._history: list[tuple[str, str]] = []
        self._id_prefix = "a"
        self._event_seq = itertools.count(1)
        self._ts = int(time.time() * 1000)
        self._failures: list[dict] = []
        self._runner: web.AppRunner | None = None
        self.text_styles = True  # False: refuse textStyle like signal-cli before 0.11.6

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> FakeSignalCli:
        app = web.Application()
        app.router.add_post("/api/v1/rpc", self._rpc)
        app.router.add_get("/api/v1/events", self._events)
        app.router.add_get("/api/v1/check", self._check)
        self._runner = web.AppRunner(app, shutdown_timeout=0.5)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        host, port = self._runner.addresses[0][:2]
        self.url = f"http://{host}:{port}"
        return self

    async def stop(self) -> None:
        self.drop_streams()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        shutil.rmtree(self.attachments_dir, ignore_errors=True)

    async def __aenter__(self) -> FakeSignalCli:
        return await self.start()

    async def __aexit__(self, *exc: Any) -> None:
        await self.stop()

    # ------------------------------------------------------------------ helpers for tests

    def next_timestamp(self) -> int:
        self._ts += 1
        return self._ts

    @property
    def connected_clients(self) -> int:
        return len(self._clients)

    async def wait_for_clients(self, n: int = 1, timeout: float = 5.0) -> None:
        await self._wait(lambda: len(self._clients) >= n, timeout, f"{n} SSE client(s)")

    async def wait_for_sent(self, n: int = 1, timeout: float = 5.0) -> list[dict]:
        await self._wait(lambda: len(self.sent) >= n, timeout, f"{n} sent message(s)")
        return self.sent

    async def wait_for_calls(self, method: str, n: int = 1, timeout: float = 5.0) -> list[dict]:
        await self._wait(lambda: len(self.calls(method)) >= n, timeout, f"{n} {method} call(s)")
        return self.calls(method)

    def calls(self, method: str) -> list[dict]:
        return [p for m, p in self.rpc_calls if m == method]

    async def _wait(self, cond, timeout: float, what: str) -> None:
        deadline = asyncio.get_running_loop().time() + timeout
        while not cond():
            if asyncio.get_running_loop().time() > deadline:
                raise AssertionError(f"timed out waiting for {what}")
            await asyncio.sleep(0.01)

    def fail_rpc_next(
        self, status: int = 500, *, times: int = 1, error: dict | None = None
    ) -> None:
        """Make the next ``times`` RPC calls fail: HTTP ``status``, or (``error`` given) a
        JSON-RPC error object with HTTP 200."""
        for _ in range(times):
            self._failures.append({"status": status, "error": error})

    def drop_streams(self) -> None:
        """Abruptly close every SSE connection (no clean end of the chunked body)."""
        clients, self._clients = self._clients, set()
        for client in clients:
            transport = client.request.transport
            if transport is not None:
                transport.abort()
            client.queue.put_nowait(_CLOSE)

    def restart_event_ids(self) -> None:
        """Simulate a signal-cli restart: old event ids become unknown, so a reconnecting
        client with ``Last-Event-ID`` gets every kept event again."""
        self._id_prefix = chr(ord(self._id_prefix) + 1)

    def write_attachment(
        self,
        content: bytes,
        *,
        filename: str = "file.bin",
        content_type: str = "application/octet-stream",
    ) -> dict:
        ext = Path(filename).suffix
        att_id = base64.urlsafe_b64encode(uuidlib.uuid4().bytes).decode().rstrip("=") + ext
        (self.attachments_dir / att_id).write_bytes(content)
        return {
            "contentType": content_type,
            "filename": filename,
            "id": att_id,
            "size": len(content),
            "width": None,
            "height": None,
            "caption": None,
            "uploadTimestamp": None,
        }

    def inject_message(
        self,
        source: str,
        text: str,
        *,
        group_id: str | None = None,
        group_name: str | None = None,
        mentions: list | None = None,
        quote: dict | None = None,
        attachments: list[dict] | None = None,
        timestamp: int | None = None,
        source_name: str = "Test User",
        source_uuid: str | None = None,
    ) -> dict:
        """Push a dataMessage envelope from ``source`` and return it.

        ``mentions``: raw signal-cli mention dicts, or plain numbers/uuids — these are
        matched in order to the U+FFFC placeholders in ``text`` (UTF-16 offsets, as Signal).
        ``quote``: ``{"id": ts, "author": number, "text": ...}``.
        ``attachments``: raw dicts, or ``{"content": bytes, "filename", "contentType"}``
        which are written to ``attachments_dir/<id>`` the way signal-cli stores them.
        """
        ts = timestamp if timestamp is not None else self.next_timestamp()
        number = source if source.startswith("+") else None
        suuid = source_uuid or (source if number is None else _uuid_for(source))
        dm: dict[str, Any] = {
            "timestamp": ts,
            "message": text,
            "expiresInSeconds": 0,
            "viewOnce": False,
        }
        if group_id:
            dm["groupInfo"] = {
                "groupId": group_id,
                "groupName": group_name or "",
                "revision": 1,
                "type": "DELIVER",
            }
        if mentions:
            dm["mentions"] = self._mentions(text, mentions)
        if quote:
            q = dict(quote)
            author = q.get("author")
            if author:
                q.setdefault("authorNumber", author if author.startswith("+") else None)
                q.setdefault(
                    "authorUuid", self.account_uuid if author == self.account else _uuid_for(author)
                )
            q.setdefault("text", "")
            q.setdefault("attachments", [])
            dm["quote"] = q
        if attachments:
            dm["attachments"] = [
                self.write_attachment(
                    a["content"],
                    filename=a.get("filename", "file.bin"),
                    content_type=a.get("contentType", "application/octet-stream"),
                )
                if "content" in a
                else a
                for a in attachments
            ]
        envelope = {
            "source": number or suuid,
            "sourceNumber": number,
            "sourceUuid": suuid,
            "sourceName": source_name,
            "sourceDevice": 1,
            "timestamp": ts,
            "serverReceivedTimestamp": ts + 5,
            "serverDeliveredTimestamp": ts + 10,
            "dataMessage": dm,
        }
        self.push_envelope(envelope)
        return envelope

    def _mentions(self, text: str, mentions: list) -> list[dict]:
        out = []
        search_from = 0
        for m in mentions:
            if isinstance(m, dict):
                out.append(m)
                continue
            idx = text.find("\ufffc", search_from)
            if idx < 0:
                raise ValueError("more mentions than U+FFFC placeholders in text")
            search_from = idx + 1
            number = m if m.startswith("+") else None
            out.append(
                {
                    "name": m,
                    "number": number,
                    "uuid": self.account_uuid
                    if m == self.account
                    else (m if number is None else _uuid_for(m)),
                    "start": _utf16_len(text[:idx]),
                    "length": 1,
                }
            )
        return out

    def push_envelope(self, envelope: dict, *, account: str | None = None) -> None:
        """Push an arbitrary envelope (receipts, typing, sync…) or re-push one (duplicate)."""
        self.push_raw({"envelope": envelope, "account": account or self.account})

    def push_raw(self, payload: Any) -> None:
        data = payload if isinstance(payload, str) else json.dumps(payload)
        event_id = f"{self._id_prefix}{next(self._event_seq)}"
        item = (event_id, data)
        self._history.append(item)
        del self._history[: max(0, len(self._history) - self.history_size)]
        if self._clients:
            for client in self._clients:
                client.queue.put_nowait(item)
        else:
            self._pending.append(item)

    # ------------------------------------------------------------------ HTTP handlers

    async def _check(self, request: web.Request) -> web.Response:
        self.check_calls += 1
        return web.Response(status=200)

    async def _events(self, request: web.Request) -> web.StreamResponse:
        query = dict(request.query)
        acct = query.get("account")
        if acct and acct not in (self.account, self.account_uuid):
            return web.Response(status=400, text=f"Unknown account {acct}")
        last_id = request.headers.get("Last-Event-ID")
        self.events_requests.append({"query": query, "last_event_id": last_id})
        resp = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        await resp.prepare(request)
        client = _Client(request, query, last_id)
        if last_id is not None:
            ids = [i for i, _ in self._history]
            backlog = (
                self._history[ids.index(last_id) + 1 :] if last_id in ids else list(self._history)
            )
            self._pending.clear()
        else:
            backlog, self._pending = self._pending, []
        for item in backlog:
            client.queue.put_nowait(item)
        self._clients.add(client)
        try:
            while True:
                try:
                    item = await asyncio.wait_for(client.queue.get(), self.keepalive)
                except TimeoutError:
                    await resp.write(b":\n\n")
                    continue
                if item is _CLOSE:
                    break
                event_id, data = item
                frame = (
                    f"id:{event_id}\nevent:receive\n"
                    + "".join(f"data:{line}\n" for line in data.split("\n"))
                    + "\n"
                )
                await resp.write(frame.encode())
        except (ConnectionResetError, RuntimeError, asyncio.CancelledError):
            pass
        finally:
            self._clients.discard(client)
        return resp

    async def _rpc(self, request: web.Request) -> web.Response:
        try:
            body = await request.json()
        except ValueError:
            return self._error(None, -32700, "Parse error")
        req_id = body.get("id")
        method = body.get("method")
        params = body.get("params") or {}
        self.rpc_calls.append((method, params))
        if self._failures:
            failure = self._failures.pop(0)
            if failure["error"] is not None:
                return web.json_response(
                    {"jsonrpc": "2.0", "error": failure["error"], "id": req_id}
                )
            return web.Response(status=failure["status"], text="fake failure")
        if not method:
            return self._error(req_id, -32600, "method field must be set")
        acct = params.get("account")
        if acct and acct not in (self.account, self.account_uuid):
            return self._error(req_id, -32602, f"Unknown account {acct}")
        handler = {
            "send": self._send,
            "sendTyping": self._typing,
            "sendReaction": self._reaction,
            "version": self._version,
        }.get(method)
        if handler is None:
            return self._error(req_id, -32601, "Method not implemented")
        try:
            result = handler(params)
        except ValueError as e:
            return self._error(req_id, -1, str(e))
        return web.json_response({"jsonrpc": "2.0", "result": result, "id": req_id})

    @staticmethod
    def _error(req_id: Any, code: int, message: str) -> web.Response:
        return web.json_response(
            {
                "jsonrpc": "2.0",
                "error": {"code": code, "message": message, "data": None},
                "id": req_id,
            }
        )

    @staticmethod
    def _check_target(params: dict) -> None:
        has_r = bool(params.get("recipient"))
        has_g = bool(params.get("groupId"))
        if has_r == has_g:
            raise ValueError("exactly one of recipient or groupId is required")
        if has_r and not isinstance(params["recipient"], (list, str)):
            raise ValueError("recipient must be a string or a list")

    def _send(self, params: dict) -> dict:
        self._check_target(params)
        if "textStyle" in params:
            if not self.text_styles:
                raise ValueError('Unrecognized field "textStyle"')
            styles = params["textStyle"]
            text16 = len((params.get("message") or "").encode("utf-16-le")) // 2
            for st in styles if isinstance(styles, list) else [styles]:
                start, length, style = str(st).split(":")
                if (
                    style not in ("BOLD", "ITALIC", "SPOILER", "STRIKETHROUGH", "MONOSPACE")
                    or int(start) < 0
                    or int(length) <= 0
                    or int(start) + int(length) > text16
                ):
                    raise ValueError(f"Invalid text style {st}")
        atts = params.get("attachments") or params.get("attachment") or []
        if isinstance(atts, str):
            atts = [atts]
        if not params.get("message") and not atts:
            raise ValueError("No message given")
        for a in atts:
            if not a.startswith("data:") and not Path(a).is_file():
                raise ValueError(f"Failed to read attachment {a}")
        if "quoteTimestamp" in params and not params.get("quoteAuthor"):
            raise ValueError("quoteAuthor is required with quoteTimestamp")
        ts = self.next_timestamp()
        self.sent.append(dict(params, timestamp=ts))
        return {"timestamp": ts, "results": [{"type": "SUCCESS"}]}

    def _typing(self, params: dict) -> dict:
        self._check_target(params)
        return {}

    def _reaction(self, params: dict) -> dict:
        self._check_target(params)
        for key in ("emoji", "targetAuthor", "targetTimestamp"):
            if not params.get(key):
                raise ValueError(f"{key} is required")
        return {"timestamp": self.next_timestamp(), "results": [{"type": "SUCCESS"}]}

    @staticmethod
    def _version(params: dict) -> dict:
        return {"version": "0.13.99-fake"}
