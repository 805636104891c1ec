"""A wire-level fake of Slack for tests: Web API under ``/api/``, the external-upload URL,
private file downloads and a Socket Mode websocket, all on 127.0.0.1 (aiohttp).

    async with FakeSlack() as fake:                       # bot_token="xoxb-test", app_token="xapp-test"
        ch = SlackChannel(bot_token=fake.bot_token, app_token=fake.app_token, api_base=fake.api_base)
        await ch.start(sink)
        env = await fake.push_event(fake.message_event("D1", "U1", "hi"))
        await fake.wait_for_ack(env)
        await ch.send(OutboundMessage(chat_id="D1", text="hello"))
        posts = await fake.wait_for_posts(1)              # [{"channel": "D1", "text": "hello", ...}]

HTTP mode: ``await post_http_event(url, secret, fake.event_callback(event))`` signs and posts.

Private files: ``add_file(name, data, mime)`` returns the event's file object (its ``size`` is
the real length unless ``declared_size=`` says otherwise, ``None`` leaves it out); every GET of
a file is recorded in ``downloads`` (file ids); with ``chunked_downloads = True`` files are
streamed without a Content-Length header.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import itertools
import json
import time
import urllib.parse
import uuid
from typing import Any

import aiohttp
from aiohttp import web
import contextlib


class FakeSlack:
    def __init__(
        self,
        bot_user_id: str = "UBOT",
        bot_id: str = "BBOT",
        team_id: str = "T1",
        *,
        bot_token: str = "xoxb-test",
        app_token: str = "xapp-test",
        bot_name: str = "chela",
        app_id: str = "A1",
    ) -> None:
        self.bot_user_id = bot_user_id
        self.bot_id = bot_id
        self.team_id = team_id
        self.bot_token = bot_token
        self.app_token = app_token
        self.bot_name = bot_name
        self.app_id = app_id

        self.calls: list[tuple[str, dict]] = []  # (method, params) for every Web API call
        self.posted: list[dict] = []  # chat.postMessage params (+ "ts")
        self.ephemeral: list[dict] = []
        self.updates: list[dict] = []  # chat.update params
        self.deleted: list[str] = []  # ts of posts removed by chat.delete
        self.reactions: list[dict] = []  # {"channel", "timestamp", "name"}
        self.uploads: list[
            dict
        ] = []  # {"file_id", "filename", "title", "bytes", "channel", "thread_ts"}
        self.acks: list[str] = []  # envelope ids acked over the websocket
        self.ack_payloads: list[dict] = []
        self.envelopes: list[dict] = []  # envelopes sent
        self.socket_connections = 0
        self.files: dict[
            str, tuple[bytes, str]
        ] = {}  # downloadable private files: id -> (bytes, mime)
        self.downloads: list[str] = []  # file ids fetched (with the right token)
        self.chunked_downloads = False

        self._failures: dict[str, list[dict]] = {}
        self._pending_uploads: dict[str, dict] = {}
        self._ts = itertools.count(1)
        self._ids = itertools.count(1)
        self._ws: list[web.WebSocketResponse] = []
        self._cond: asyncio.Condition | None = None
        self._runner: web.AppRunner | None = None
        self.url = ""

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> FakeSlack:
        self._cond = asyncio.Condition()
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/api/{method}", self._api)
        app.router.add_post("/upload/{file_id}", self._upload)
        app.router.add_get("/files/{file_id}/{name}", self._download)
        app.router.add_get("/socket", self._socket)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        host, port = self._runner.addresses[0][:2]
        self.url = f"http://{host}:{port}"
        return self

    async def stop(self) -> None:
        for ws in list(self._ws):
            await ws.close()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> FakeSlack:
        return await self.start()

    async def __aexit__(self, *exc) -> None:
        await self.stop()

    @property
    def api_base(self) -> str:
        return f"{self.url}/api/"

    # ------------------------------------------------------------------ controls

    def fail_next(
        self,
        method: str,
        status: int = 429,
        retry_after: int | float | None = 1,
        error: str = "ratelimited",
        times: int = 1,
    ) -> None:
        """The next ``times`` calls of ``method`` answer ``status`` (+ ``Retry-After``) and an error."""
        for _ in range(times):
            self._failures.setdefault(method, []).append(
                {"status": status, "retry_after": retry_after, "error": error}
            )

    async def _notify(self) -> None:
        assert self._cond is not None
        async with self._cond:
            self._cond.notify_all()

    async def _wait(self, pred, timeout: float, what: str):
        assert self._cond is not None
        async with self._cond:
            try:
                await asyncio.wait_for(self._cond.wait_for(pred), timeout)
            except TimeoutError:
                raise AssertionError(f"FakeSlack: timed out waiting for {what}") from None

    async def wait_for_posts(self, n: int, timeout: float = 5.0) -> list[dict]:
        await self._wait(
            lambda: len(self.posted) >= n, timeout, f"{n} posts (have {len(self.posted)})"
        )
        return list(self.posted)

    async def wait_for_ack(self, envelope_id: str, timeout: float = 5.0) -> None:
        await self._wait(lambda: envelope_id in self.acks, timeout, f"ack of {envelope_id}")

    async def wait_for_acks(self, n: int, timeout: float = 5.0) -> list[str]:
        await self._wait(lambda: len(self.acks) >= n, timeout, f"{n} acks (have {len(self.acks)})")
        return list(self.acks)

    async def wait_for_socket(self, timeout: float = 5.0) -> None:
        await self._wait(lambda: bool(self._ws), timeout, "a Socket Mode connection")

    def add_file(
        self,
        name: str,
        data: bytes,
        mimetype: str = "application/octet-stream",
        *,
        declared_size: Any = -1,
    ) -> dict:
        """Register a private file and return its Slack file object (for ``files=[...]``).
        ``declared_size``: the ``size`` the object claims (default the real length; ``None``
        leaves the field out)."""
        fid = f"F{next(self._ids):04d}"
        self.files[fid] = (data, mimetype)
        url = f"{self.url}/files/{fid}/{urllib.parse.quote(name, safe='')}"
        obj = {
            "id": fid,
            "name": name,
            "title": name,
            "mimetype": mimetype,
            "size": len(data),
            "url_private": url,
            "url_private_download": url + "?download=1",
            "filetype": name.rsplit(".", 1)[-1],
        }
        if declared_size is None:
            del obj["size"]
        elif declared_size != -1:
            obj["size"] = declared_size
        return obj

    # ------------------------------------------------------------------ payload builders

    def new_ts(self) -> str:
        return f"{int(time.time())}.{next(self._ts):06d}"

    def message_event(
        self,
        channel: str,
        user: str | None,
        text: str,
        ts: str | None = None,
        thread_ts: str | None = None,
        channel_type: str = "im",
        bot_id: str | None = None,
        subtype: str | None = None,
        files: list[dict] | None = None,
        **extra: Any,
    ) -> dict:
        ts = ts or self.new_ts()
        ev: dict[str, Any] = {
            "type": "message",
            "channel": channel,
            "text": text,
            "ts": ts,
            "event_ts": ts,
            "channel_type": channel_type,
            "team": self.team_id,
        }
        if user:
            ev["user"] = user
            ev["client_msg_id"] = str(uuid.uuid4())
            ev["blocks"] = [
                {
                    "type": "rich_text",
                    "block_id": "b1",
                    "elements": [
                        {"type": "rich_text_section", "elements": [{"type": "text", "text": text}]}
                    ],
                }
            ]
        if bot_id:
            ev["bot_id"] = bot_id
            if not user:
                ev["subtype"] = subtype or "bot_message"
                ev["username"] = extra.pop("username", "other-bot")
        if subtype:
            ev["subtype"] = subtype
        if thread_ts:
            ev["thread_ts"] = thread_ts
            ev["parent_user_id"] = extra.pop("parent_user_id", self.bot_user_id)
        if files:
            ev["files"] = files
            ev.setdefault("subtype", "file_share")
        ev.update(extra)
        return ev

    def app_mention_event(
        self,
        channel: str,
        user: str,
        text: str,
        ts: str | None = None,
        thread_ts: str | None = None,
        **extra: Any,
    ) -> dict:
        ts = ts or self.new_ts()
        ev: dict[str, Any] = {
            "type": "app_mention",
            "user": user,
            "text": text,
            "ts": ts,
            "event_ts": ts,
            "channel": channel,
            "team": self.team_id,
            "client_msg_id": str(uuid.uuid4()),
        }
        if thread_ts:
            ev["thread_ts"] = thread_ts
        ev.update(extra)
        return ev

    def event_callback(self, event: dict, event_id: str | None = None) -> dict:
        return {
            "token": "verification-token",
            "team_id": self.team_id,
            "api_app_id": self.app_id,
            "event": event,
            "type": "event_callback",
            "event_id": event_id or f"Ev{uuid.uuid4().hex[:10].upper()}",
            "event_time": int(time.time()),
            "authorizations": [
                {
                    "enterprise_id": None,
                    "team_id": self.team_id,
                    "user_id": self.bot_user_id,
                    "is_bot": True,
                    "is_enterprise_install": False,
                }
            ],
            "is_ext_shared_channel": False,
            "event_context": uuid.uuid4().hex,
        }

    async def push_event(
        self,
        event: dict,
        event_id: str | None = None,
        *,
        retry_attempt: int = 0,
        envelope_id: str | None = None,
        timeout: float = 5.0,
    ) -> str:
        """Send an ``events_api`` envelope over the newest websocket; returns the envelope id."""
        await self.wait_for_socket(timeout)
        envelope_id = envelope_id or str(uuid.uuid4())
        env = {
            "envelope_id": envelope_id,
            "payload": self.event_callback(event, event_id),
            "type": "events_api",
            "accepts_response_payload": False,
            "retry_attempt": retry_attempt,
            "retry_reason": "timeout" if retry_attempt else "",
        }
        self.envelopes.append(env)
        await self._ws[-1].send_str(json.dumps(env))
        return envelope_id

    async def send_disconnect(self, reason: str = "refresh_requested") -> None:
        """Ask the client to reconnect (Slack does this every few hours)."""
        await self.wait_for_socket()
        await self._ws[-1].send_str(
            json.dumps({"type": "disconnect", "reason": reason, "debug_info": {"host": "fake"}})
        )

    async def wait_for_connections(self, n: int, timeout: float = 5.0) -> None:
        await self._wait(
            lambda: self.socket_connections >= n and bool(self._ws),
            timeout,
            f"{n} Socket Mode connections (have {self.socket_connections})",
        )

    # ------------------------------------------------------------------ Web API

    async def _params(self, request: web.Request) -> dict:
        params: dict[str, Any] = dict(request.query)
        ctype = request.content_type or ""
        if request.method == "POST" and request.can_read_body:
            if ctype == "application/json":
                with contextlib.suppress(ValueError):
                    params.update(await request.json())
            elif ctype in ("application/x-www-form-urlencoded", "multipart/form-data"):
                form = await request.post()
                params.update({k: v for k, v in form.items() if isinstance(v, str)})
        return params

    @staticmethod
    def _token(request: web.Request, params: dict) -> str:
        auth = request.headers.get("Authorization", "")
        if auth.lower().startswith("bearer "):
            return auth[7:].strip()
        return str(params.pop("token", "") or "")

    async def _api(self, request: web.Request) -> web.StreamResponse:
        method = request.match_info["method"]
        params = await self._params(request)
        token = self._token(request, params)
        params.pop("token", None)
        self.calls.append((method, dict(params)))
        await self._notify()

        failures = self._failures.get(method)
        if failures:
            f = failures.pop(0)
            headers = {"Retry-After": str(f["retry_after"])} if f["retry_after"] is not None else {}
            return web.json_response(
                {"ok": False, "error": f["error"]}, status=f["status"], headers=headers
            )

        want = self.app_token if method == "apps.connections.open" else self.bot_token
        if not token:
            return web.json_response({"ok": False, "error": "not_authed"})
        if token != want:
            return web.json_response({"ok": False, "error": "invalid_auth"})

        handler = getattr(self, "_m_" + method.replace(".", "_"), None)
        if handler is None:
            return web.json_response({"ok": False, "error": "unknown_method"}, status=404)
        result = await handler(params)
        await self._notify()
        return web.json_response(result)

    async def _m_auth_test(self, p: dict) -> dict:
        return {
            "ok": True,
            "url": "https://fake.slack.com/",
            "team": "Fake Team",
            "user": self.bot_name,
            "team_id": self.team_id,
            "user_id": self.bot_user_id,
            "bot_id": self.bot_id,
            "is_enterprise_install": False,
        }

    async def _m_apps_connections_open(self, p: dict) -> dict:
        host = self.url.removeprefix("http://")
        return {
            "ok": True,
            "url": f"ws://{host}/socket?ticket={uuid.uuid4().hex}&app_id={self.app_id}",
        }

    async def _m_chat_postMessage(self, p: dict) -> dict:
        channel = p.get("channel")
        text = p.get("text") or ""
        if not channel:
            return {"ok": False, "error": "channel_not_found"}
        if not text and not p.get("blocks") and not p.get("attachments"):
            return {"ok": False, "error": "no_text"}
        if len(text) > 40000:
            return {"ok": False, "error": "msg_too_long"}
        ts = self.new_ts()
        rec = dict(p)
        rec["ts"] = ts
        rec.setdefault("thread_ts", None)
        self.posted.append(rec)
        message = {
            "type": "message",
            "text": text,
            "user": self.bot_user_id,
            "bot_id": self.bot_id,
            "ts": ts,
        }
        if p.get("thread_ts"):
            message["thread_ts"] = p["thread_ts"]
        return {"ok": True, "channel": channel, "ts": ts, "message": message}

    def _own_post(self, channel: Any, ts: Any) -> dict | None:
        return next(
            (
                m
                for m in self.posted
                if m["channel"] == channel and m["ts"] == ts and not m.get("deleted")
            ),
            None,
        )

    async def _m_chat_update(self, p: dict) -> dict:
        """Edit one of the bot's posts: the post's ``text`` changes, ``edits`` keeps the
        history of texts; recorded in ``updates`` too."""
        post = self._own_post(p.get("channel"), p.get("ts"))
        if post is None:
            return {"ok": False, "error": "message_not_found"}
        text = p.get("text") or ""
        if not text and not p.get("blocks"):
            return {"ok": False, "error": "no_text"}
        if len(text) > 40000:
            return {"ok": False, "error": "msg_too_long"}
        post.setdefault("edits", []).append(text)
        post["text"] = text
        self.updates.append(dict(p))
        return {"ok": True, "channel": p["channel"], "ts": p["ts"], "text": text}

    async def _m_chat_delete(self, p: dict) -> dict:
        post = self._own_post(p.get("channel"), p.get("ts"))
        if post is None:
            return {"ok": False, "error": "message_not_found"}
        post["deleted"] = True
        self.deleted.append(p["ts"])
        return {"ok": True, "channel": p["channel"], "ts": p["ts"]}

    def visible_posts(self, channel: str) -> list[dict]:
        """The bot's posts in a channel that were not deleted, in order."""
        return [m for m in self.posted if m["channel"] == channel and not m.get("deleted")]

    async def _m_chat_postEphemeral(self, p: dict) -> dict:
        self.ephemeral.append(dict(p))
        return {"ok": True, "message_ts": self.new_ts()}

    async def _m_reactions_add(self, p: dict) -> dict:
        rec = {"channel": p.get("channel"), "timestamp": p.get("timestamp"), "name": p.get("name")}
        if not rec["name"]:
            return {"ok": False, "error": "invalid_name"}
        if rec in self.reactions:
            return {"ok": False, "error": "already_reacted"}
        self.reactions.append(rec)
        return {"ok": True}

    async def _m_conversations_info(self, p: dict) -> dict:
        ch = p.get("channel", "")
        return {
            "ok": True,
            "channel": {
                "id": ch,
                "name": f"chan-{ch.lower()}",
                "is_im": ch.startswith("D"),
                "is_channel": ch.startswith("C"),
            },
        }

    async def _m_users_info(self, p: dict) -> dict:
        u = p.get("user", "")
        return {
            "ok": True,
            "user": {
                "id": u,
                "name": f"user-{u.lower()}",
                "real_name": f"User {u}",
                "profile": {"display_name": f"user-{u.lower()}"},
            },
        }

    async def _m_files_getUploadURLExternal(self, p: dict) -> dict:
        fid = f"F{next(self._ids):04d}"
        self._pending_uploads[fid] = {
            "filename": p.get("filename"),
            "length": int(p.get("length") or 0),
            "bytes": None,
        }
        return {"ok": True, "upload_url": f"{self.url}/upload/{fid}", "file_id": fid}

    async def _upload(self, request: web.Request) -> web.StreamResponse:
        fid = request.match_info["file_id"]
        pending = self._pending_uploads.get(fid)
        if pending is None:
            return web.Response(status=404, text="unknown upload")
        pending["bytes"] = await request.read()
        return web.Response(text=f"OK - {len(pending['bytes'])}")

    async def _m_files_completeUploadExternal(self, p: dict) -> dict:
        files = p.get("files")
        if isinstance(files, str):
            files = json.loads(files)
        channel = p.get("channel_id") or None
        out = []
        for f in files or []:
            pending = self._pending_uploads.pop(f["id"], None)
            if pending is None or pending["bytes"] is None:
                return {"ok": False, "error": "file_not_found"}
            ts = self.new_ts()
            self.uploads.append(
                {
                    "file_id": f["id"],
                    "filename": pending["filename"],
                    "title": f.get("title"),
                    "bytes": pending["bytes"],
                    "channel": channel,
                    "thread_ts": p.get("thread_ts") or None,
                    "initial_comment": p.get("initial_comment"),
                    "ts": ts,
                }
            )
            shares = (
                {"public": {channel: [{"ts": ts, "thread_ts": p.get("thread_ts")}]}}
                if channel
                else {}
            )
            out.append(
                {
                    "id": f["id"],
                    "name": pending["filename"],
                    "title": f.get("title"),
                    "shares": shares,
                }
            )
        return {"ok": True, "files": out}

    async def _download(self, request: web.Request) -> web.StreamResponse:
        if request.headers.get("Authorization", "") != f"Bearer {self.bot_token}":
            return web.Response(status=403, text="forbidden")
        item = self.files.get(request.match_info["file_id"])
        if item is None:
            return web.Response(status=404)
        self.downloads.append(request.match_info["file_id"])
        if not self.chunked_downloads:
            return web.Response(body=item[0], content_type=item[1])
        resp = web.StreamResponse(headers={"Content-Type": item[1]})
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        for i in range(0, len(item[0]), 16 * 1024):
            try:
                await resp.write(item[0][i : i + 16 * 1024])
            except (ConnectionError, RuntimeError):
                return resp  # the client hung up (e.g. at its size cap)
        await resp.write_eof()
        return resp

    # ------------------------------------------------------------------ Socket Mode

    async def _socket(self, request: web.Request) -> web.StreamResponse:
        ws = web.WebSocketResponse(autoping=True)
        await ws.prepare(request)
        self._ws.append(ws)
        self.socket_connections += 1
        await ws.send_str(
            json.dumps(
                {
                    "type": "hello",
                    "num_connections": len(self._ws),
                    "debug_info": {"host": "fake", "approximate_connection_time": 18060},
                    "connection_info": {"app_id": self.app_id},
                }
            )
        )
        await self._notify()
        try:
            async for m in ws:
                if m.type != aiohttp.WSMsgType.TEXT:
                    continue
                try:
                    data = json.loads(m.data)
                except ValueError:
                    continue
                if isinstance(data, dict) and data.get("envelope_id"):
                    self.acks.append(data["envelope_id"])
                    self.ack_payloads.append(data)
                    await self._notify()
        finally:
            if ws in self._ws:
                self._ws.remove(ws)
        return ws


def sign(signing_secret: str, timestamp: str, body: str) -> str:
    base = f"v0:{timestamp}:{body}".encode()
    return "v0=" + hmac.new(signing_secret.encode(), base, hashlib.sha256).hexdigest()


async def post_http_event(
    url: str,
    signing_secret: str,
    payload: dict,
    *,
    bad_signature: bool = False,
    retry_num: int | None = None,
    timestamp: int | None = None,
) -> tuple[int, str]:
    """POST a signed Events API request like Slack does; returns ``(status, body text)``."""
    body = json.dumps(payload)
    ts = str(timestamp if timestamp is not None else int(time.time()))
    signature = sign(signing_secret, ts, body)
    if bad_signature:
        signature = sign(signing_secret + "-wrong", ts, body)
    headers = {
        "Content-Type": "application/json",
        "X-Slack-Request-Timestamp": ts,
        "X-Slack-Signature": signature,
    }
    if retry_num is not None:
        headers["X-Slack-Retry-Num"] = str(retry_num)
        headers["X-Slack-Retry-Reason"] = "http_timeout"
    async with aiohttp.ClientSession() as session:
        async with session.post(url, data=body.encode(), headers=headers) as resp:
            return resp.status, await resp.text()
