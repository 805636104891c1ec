"""A wire-level fake of the Discord REST API and gateway for tests.

One aiohttp app on 127.0.0.1 serves the REST API under ``/api/v10`` and the gateway
websocket at ``/gateway``.  The real discord.py client is pointed at it through the
Chela adapter's ``api_base`` / ``gateway_url`` options (``fake.api_base``,
``fake.gateway_url``), which only that client uses: several fakes can serve several
adapters in one process.

    fake = FakeDiscord(bot_id=1000, bot_name="chela", token="t0k")
    await fake.start()
    fake.add_guild(10, "Guild", channels=[{"id": 11, "name": "general"},
                                          {"id": 12, "name": "topic", "type": 11, "parent_id": 11}])
    dm = fake.add_dm_channel(user_id=42)
    mid = await fake.inject_message(dm, "hi", author_id=42, username="alice")
    await fake.wait_for_sent(1)
    fake.sent[0]["content"]
    fake.fail_next("POST /channels/11/messages", status=429, retry_after=0.2)
    await fake.stop()

The gateway speaks plain JSON text frames (discord.py only runs its zlib/zstd
decompressor on binary frames, so ``compress=`` in the query is accepted and ignored).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from datetime import datetime, UTC
from typing import Any

from aiohttp import WSMsgType, web
import contextlib

JSON = "application/json"
NONCE_WINDOW = 300.0  # "a few minutes", as Discord documents enforce_nonce
_EPOCH_MS = 1420070400000


def _now_iso() -> str:
    return datetime.now(UTC).isoformat()


def _json(data: Any, status: int = 200, headers: dict | None = None) -> web.Response:
    # Content-Type must be exactly "application/json" for discord.py to parse the body.
    return web.Response(
        status=status,
        body=json.dumps(data).encode(),
        headers={"Content-Type": JSON, **(headers or {})},
    )


class FakeDiscord:
    def __init__(
        self,
        bot_id: int = 900000000000000001,
        bot_name: str = "chela",
        *,
        token: str = "test-token",
        heartbeat_interval_ms: int = 41250,
        send_ready: bool = True,
        identify_close_code: int | None = None,
    ) -> None:
        self.bot_id = int(bot_id)
        self.bot_name = bot_name
        self.token = token
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.send_ready = send_ready  # False: never send READY (to test start timeouts)
        self.cdn_files: dict[str, bytes] = {}  # "<channel>/<id>/<filename>" -> bytes (attachments)
        self.cdn_downloads: list[str] = []  # paths fetched from the attachment CDN
        self.identify_close_code = identify_close_code  # e.g. 4014: privileged intents not enabled
        self.guilds: dict[int, dict] = {}
        self.channels: dict[int, dict] = {}  # every channel / thread / DM by id
        self.messages: dict[int, dict] = {}  # every message payload by id (injected and sent)
        self.sent: list[dict] = []  # POST /channels/{id}/messages that succeeded
        self.edits: list[dict] = []  # PATCH of a message: {"id", "channel_id", "content"}
        self.deleted: list[int] = []  # ids of messages deleted by DELETE
        self.calls: list[dict] = []  # every REST request: method, path, status
        self.typing: list[int] = []  # channel ids
        self.reactions: list[dict] = []  # {channel_id, message_id, emoji}
        self.identifies: list[dict] = []
        self._failures: list[dict] = []
        # like Discord: a message created with enforce_nonce and a nonce already used in
        # that channel within NONCE_WINDOW seconds is returned again, not created twice
        self._nonces: dict[tuple[int, str], tuple[int, float]] = {}
        self.nonce_hits = 0  # requests answered with the message their nonce made earlier
        self.send_delay = 0.0  # seconds a message POST waits, after creating, before answering
        self._ids = itertools.count(1)
        self._seq = 0
        self._sockets: list[web.WebSocketResponse] = []
        self._sent_cond: asyncio.Condition | None = None
        self._runner: web.AppRunner | None = None
        self.port = 0

    # ---------------------------------------------------------------- lifecycle
    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def api_base(self) -> str:
        return f"{self.base_url}/api/v10"

    @property
    def gateway_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/gateway"

    async def start(self) -> None:
        self._sent_cond = asyncio.Condition()
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_get("/gateway", self._ws_handler)
        app.router.add_route("*", "/api/v10/{tail:.*}", self._rest)
        app.router.add_get("/attachments/{tail:.*}", self._attachment)
        self._runner = web.AppRunner(app, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    async def stop(self) -> None:
        for ws in list(self._sockets):
            with contextlib.suppress(Exception):
                await ws.close()
        self._sockets.clear()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    # ---------------------------------------------------------------- ids / payloads
    def new_id(self) -> int:
        """A snowflake with a current timestamp."""
        ms = int(time.time() * 1000) - _EPOCH_MS
        return (ms << 22) | (next(self._ids) & 0x3FFFFF)

    def user_payload(
        self, user_id: int, username: str, *, bot: bool = False, global_name: str | None = None
    ) -> dict:
        return {
            "id": str(user_id),
            "username": username,
            "discriminator": "0",
            "global_name": global_name,
            "avatar": None,
            "bot": bot,
            "public_flags": 0,
            "flags": 0,
        }

    @property
    def bot_user(self) -> dict:
        u = self.user_payload(self.bot_id, self.bot_name, bot=True)
        u.update(verified=True, mfa_enabled=False, locale="en-US")
        return u

    def _member(self, user: dict) -> dict:
        return {
            "user": user,
            "roles": [],
            "joined_at": _now_iso(),
            "deaf": False,
            "mute": False,
            "flags": 0,
            "nick": None,
        }

    def add_guild(self, guild_id: int, name: str, channels: list[dict] | None = None) -> dict:
        """Channels: ``{"id", "name", "type"=0}``; threads have type 11 (or 10/12) and ``parent_id``.
        Dispatches GUILD_CREATE if a client is already connected."""
        guild_id = int(guild_id)
        guild = {"id": str(guild_id), "name": name, "channels": [], "threads": []}
        for pos, ch in enumerate(channels or []):
            ctype = int(ch.get("type", 0))
            cid = int(ch["id"])
            payload: dict = {
                "id": str(cid),
                "name": ch.get("name", f"channel-{cid}"),
                "type": ctype,
                "guild_id": str(guild_id),
            }
            if ctype in (10, 11, 12):
                payload.update(
                    parent_id=str(ch["parent_id"]),
                    owner_id=str(ch.get("owner_id", self.bot_id)),
                    message_count=0,
                    member_count=1,
                    rate_limit_per_user=0,
                    flags=0,
                    thread_metadata={
                        "archived": False,
                        "auto_archive_duration": 1440,
                        "archive_timestamp": _now_iso(),
                        "locked": False,
                    },
                )
                guild["threads"].append(payload)
            else:
                payload.update(
                    position=pos,
                    permission_overwrites=[],
                    nsfw=False,
                    topic=None,
                    parent_id=ch.get("parent_id"),
                    rate_limit_per_user=0,
                    last_message_id=None,
                )
                guild["channels"].append(payload)
            self.channels[cid] = payload
        self.guilds[guild_id] = guild
        if self._sockets:
            asyncio.get_running_loop().create_task(
                self.dispatch("GUILD_CREATE", self._guild_create(guild))
            )
        return guild

    def add_thread(
        self,
        guild_id: int,
        thread_id: int,
        parent_id: int,
        name: str = "thread",
        *,
        announce: bool = False,
    ) -> dict:
        """A thread of an existing guild.  ``announce=False``: known to REST (GET /channels/{id})
        only, as if the client had missed THREAD_CREATE; True: dispatch THREAD_CREATE too."""
        payload = {
            "id": str(thread_id),
            "name": name,
            "type": 11,
            "guild_id": str(guild_id),
            "parent_id": str(parent_id),
            "owner_id": str(self.bot_id),
            "message_count": 0,
            "member_count": 1,
            "rate_limit_per_user": 0,
            "flags": 0,
            "thread_metadata": {
                "archived": False,
                "auto_archive_duration": 1440,
                "archive_timestamp": _now_iso(),
                "locked": False,
            },
        }
        self.channels[int(thread_id)] = payload
        self.guilds[int(guild_id)]["threads"].append(payload)
        if announce and self._sockets:
            asyncio.get_running_loop().create_task(
                self.dispatch("THREAD_CREATE", {**payload, "newly_created": True})
            )
        return payload

    def add_dm_channel(self, user_id: int, username: str = "") -> int:
        for cid, ch in self.channels.items():
            if ch.get("type") == 1 and ch["recipients"][0]["id"] == str(user_id):
                return cid
        cid = self.new_id()
        self.channels[cid] = {
            "id": str(cid),
            "type": 1,
            "last_message_id": None,
            "recipients": [self.user_payload(int(user_id), username or f"user{user_id}")],
        }
        return cid

    def _guild_create(self, guild: dict) -> dict:
        return {
            "id": guild["id"],
            "name": guild["name"],
            "unavailable": False,
            "member_count": 2,
            "large": False,
            "icon": None,
            "owner_id": "1",
            "features": [],
            "emojis": [],
            "stickers": [],
            "verification_level": 0,
            "default_message_notifications": 0,
            "explicit_content_filter": 0,
            "mfa_level": 0,
            "nsfw_level": 0,
            "premium_tier": 0,
            "preferred_locale": "en-US",
            "system_channel_flags": 0,
            "afk_timeout": 300,
            "joined_at": _now_iso(),
            "roles": [
                {
                    "id": guild["id"],
                    "name": "@everyone",
                    "permissions": "1071698660929",
                    "position": 0,
                    "color": 0,
                    "hoist": False,
                    "managed": False,
                    "mentionable": False,
                    "flags": 0,
                }
            ],
            "channels": guild["channels"],
            "threads": guild["threads"],
            "members": [self._member(self.bot_user)],
            "voice_states": [],
            "presences": [],
            "stage_instances": [],
            "guild_scheduled_events": [],
            "soundboard_sounds": [],
        }

    def _message_payload(
        self,
        channel_id: int,
        content: str,
        author: dict,
        *,
        message_id: int | None = None,
        guild_id: int | None = None,
        mentions: list[dict] | None = None,
        reference: dict | None = None,
        attachments: list[dict] | None = None,
    ) -> dict:
        mid = message_id or self.new_id()
        msg: dict = {
            "id": str(mid),
            "channel_id": str(channel_id),
            "type": 19 if reference else 0,
            "content": content,
            "author": author,
            "timestamp": _now_iso(),
            "edited_timestamp": None,
            "tts": False,
            "mention_everyone": False,
            "mentions": mentions or [],
            "mention_roles": [],
            "attachments": attachments or [],
            "embeds": [],
            "pinned": False,
            "flags": 0,
            "components": [],
        }
        if guild_id is not None:
            msg["guild_id"] = str(guild_id)
        if reference:
            ref_id = int(reference["message_id"])
            msg["message_reference"] = {
                "type": 0,
                "message_id": str(ref_id),
                "channel_id": str(reference.get("channel_id", channel_id)),
            }
            if guild_id is not None:
                msg["message_reference"]["guild_id"] = str(guild_id)
            msg["referenced_message"] = self.messages.get(ref_id)
        return msg

    # ---------------------------------------------------------------- test controls
    async def inject_message(
        self,
        channel_id: int,
        content: str,
        *,
        author_id: int,
        username: str = "user",
        bot: bool = False,
        guild_id: int | None = None,
        mentions: list[int] | None = None,
        referenced_message_id: int | None = None,
        attachments: list[dict] | None = None,
        global_name: str | None = None,
        nick: str | None = None,
    ) -> int:
        """Dispatch MESSAGE_CREATE to connected clients; returns the message id.

        ``attachments``: dicts with at least ``filename`` (``url``, ``content_type``, ``size`` optional;
        ``data``: bytes served at the CDN URL, ``size`` then defaults to its length;
        ``voice=True`` marks a voice message: duration and waveform set).
        ``guild_id`` defaults to the guild owning ``channel_id`` (None for DMs)."""
        channel_id = int(channel_id)
        ch = self.channels.get(channel_id)
        if guild_id is None and ch is not None and ch.get("guild_id"):
            guild_id = int(ch["guild_id"])
        author = self.user_payload(author_id, username, bot=bot, global_name=global_name)
        mention_payloads = []
        for uid in mentions or []:
            if int(uid) == self.bot_id:
                mention_payloads.append(self.user_payload(self.bot_id, self.bot_name, bot=True))
            else:
                mention_payloads.append(self.user_payload(int(uid), f"user{uid}"))
        atts = []
        for a in attachments or []:
            aid = self.new_id()
            url = a.get("url") or f"{self.base_url}/attachments/{channel_id}/{aid}/{a['filename']}"
            if a.get("data") is not None:
                self.cdn_files[f"{channel_id}/{aid}/{a['filename']}"] = bytes(a["data"])
            att = {
                "id": str(aid),
                "filename": a["filename"],
                "size": int(a.get("size", len(a["data"]) if a.get("data") is not None else 1)),
                "url": url,
                "proxy_url": url,
                "content_type": a.get("content_type"),
            }
            if a.get("voice"):
                att["duration_secs"] = float(a.get("duration", 1.0))
                att["waveform"] = "AAAA"
            atts.append(att)
        ref = {"message_id": referenced_message_id} if referenced_message_id else None
        msg = self._message_payload(
            channel_id,
            content,
            author,
            guild_id=guild_id,
            mentions=mention_payloads,
            reference=ref,
            attachments=atts,
        )
        if guild_id is not None:
            member = self._member(author)
            member.pop("user")
            member["nick"] = nick
            msg["member"] = member
        self.messages[int(msg["id"])] = msg
        await self.dispatch("MESSAGE_CREATE", msg)
        return int(msg["id"])

    def fail_next(
        self,
        route: str,
        *,
        status: int = 429,
        retry_after: float = 0.2,
        times: int = 1,
        is_global: bool = False,
        body: dict | None = None,
    ) -> None:
        """Make the next ``times`` requests matching ``"METHOD /path"`` (path after /api/v10) fail.
        429s carry Discord's body and headers (Retry-After, X-RateLimit-*, Via) so discord.py retries."""
        method, path = route.split(" ", 1)
        self._failures.append(
            {
                "method": method.upper(),
                "path": path,
                "status": status,
                "retry_after": retry_after,
                "times": times,
                "global": is_global,
                "body": body,
            }
        )

    async def wait_for_sent(self, n: int, timeout: float = 5.0) -> list[dict]:
        assert self._sent_cond is not None
        async with self._sent_cond:
            await asyncio.wait_for(self._sent_cond.wait_for(lambda: len(self.sent) >= n), timeout)
        return self.sent

    async def wait_for_call(self, method: str, path_prefix: str, timeout: float = 5.0) -> dict:
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            for c in self.calls:
                if c["method"] == method and c["path"].startswith(path_prefix):
                    return c
            if asyncio.get_running_loop().time() > deadline:
                raise TimeoutError(f"no {method} {path_prefix}")
            await asyncio.sleep(0.01)

    async def wait_for_clients(self, n: int = 1, timeout: float = 5.0) -> None:
        deadline = asyncio.get_running_loop().time() + timeout
        while sum(1 for ws in self._sockets if getattr(ws, "_chela_identified", False)) < n:
            if asyncio.get_running_loop().time() > deadline:
                raise TimeoutError("no identified gateway client")
            await asyncio.sleep(0.01)

    # ---------------------------------------------------------------- gateway
    async def dispatch(self, event: str, data: dict) -> None:
        for ws in list(self._sockets):
            if getattr(ws, "_chela_identified", False) and not ws.closed:
                await self._send_dispatch(ws, event, data)

    async def close_gateway(self, code: int, message: bytes = b"closed by the fake") -> None:
        """Close every identified gateway socket with ``code`` (4004: authentication failed,
        a close discord.py does not reconnect from)."""
        for ws in list(self._sockets):
            if getattr(ws, "_chela_identified", False) and not ws.closed:
                await ws.close(code=code, message=message)

    async def _send_dispatch(self, ws: web.WebSocketResponse, event: str, data: dict) -> None:
        self._seq += 1
        with contextlib.suppress(ConnectionError):
            await ws.send_str(json.dumps({"op": 0, "t": event, "s": self._seq, "d": data}))

    async def _ws_handler(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        self._sockets.append(ws)
        try:
            await ws.send_str(
                json.dumps(
                    {
                        "op": 10,
                        "d": {"heartbeat_interval": self.heartbeat_interval_ms},
                        "s": None,
                        "t": None,
                    }
                )
            )
            async for msg in ws:
                if msg.type != WSMsgType.TEXT:
                    continue
                payload = json.loads(msg.data)
                op = payload.get("op")
                if op == 1:
                    await ws.send_str(json.dumps({"op": 11, "d": None, "s": None, "t": None}))
                elif op == 2:
                    self.identifies.append(payload["d"])
                    if payload["d"].get("token") != self.token:
                        await ws.close(code=4004, message=b"Authentication failed.")
                        break
                    if self.identify_close_code:
                        await ws.close(
                            code=self.identify_close_code, message=b"Disallowed intent(s)."
                        )
                        break
                    if not self.send_ready:
                        continue
                    ws._chela_identified = True  # type: ignore[attr-defined]
                    await self._send_dispatch(
                        ws,
                        "READY",
                        {
                            "v": 10,
                            "user": self.bot_user,
                            "session_id": f"sess-{self.new_id()}",
                            "resume_gateway_url": self.gateway_url,
                            "private_channels": [],
                            "guilds": [
                                {"id": g["id"], "unavailable": True} for g in self.guilds.values()
                            ],
                            "application": {"id": str(self.bot_id), "flags": 0},
                        },
                    )
                    for g in self.guilds.values():
                        await self._send_dispatch(ws, "GUILD_CREATE", self._guild_create(g))
                elif op == 6:
                    # No session store: tell the client to start over.
                    await ws.send_str(json.dumps({"op": 9, "d": False, "s": None, "t": None}))
        finally:
            if ws in self._sockets:
                self._sockets.remove(ws)
        return ws

    # ---------------------------------------------------------------- REST
    def _take_failure(self, method: str, path: str) -> dict | None:
        for f in self._failures:
            if f["method"] == method and f["path"] == path:
                f["times"] -= 1
                if f["times"] <= 0:
                    self._failures.remove(f)
                return f
        return None

    async def _attachment(self, request: web.Request) -> web.StreamResponse:
        """The attachment CDN: the bytes given to ``inject_message(attachments=[{data: ...}])``."""
        path = request.match_info["tail"]
        self.cdn_downloads.append(path)
        data = self.cdn_files.get(path)
        if data is None:
            return web.Response(status=404, text="no such attachment")
        return web.Response(body=data, content_type="application/octet-stream")

    async def _rest(self, request: web.Request) -> web.StreamResponse:
        method = request.method
        path = "/" + request.match_info["tail"]
        call: dict = {"method": method, "path": path, "status": 0, "headers": dict(request.headers)}
        self.calls.append(call)
        resp = await self._route(request, method, path, call)
        call["status"] = resp.status
        return resp

    async def _route(
        self, request: web.Request, method: str, path: str, call: dict
    ) -> web.StreamResponse:
        if request.headers.get("Authorization") != f"Bot {self.token}":
            return _json({"message": "401: Unauthorized", "code": 0}, status=401)
        failure = self._take_failure(method, path)
        if failure is not None:
            if failure["status"] == 429:
                ra = failure["retry_after"]
                return _json(
                    {
                        "message": "You are being rate limited.",
                        "retry_after": ra,
                        "global": failure["global"],
                    },
                    status=429,
                    headers={
                        "Retry-After": str(max(1, int(ra + 0.999))),
                        "X-RateLimit-Limit": "5",
                        "X-RateLimit-Remaining": "0",
                        "X-RateLimit-Reset-After": str(ra),
                        "X-RateLimit-Bucket": "fake-bucket",
                        "X-RateLimit-Scope": "user",
                        "Via": "1.1 google",
                    },
                )
            return _json(
                failure["body"] or {"message": "fake failure", "code": 0}, status=failure["status"]
            )

        parts = path.strip("/").split("/")
        if method == "GET" and path == "/users/@me":
            return _json(self.bot_user)
        if method == "GET" and path == "/oauth2/applications/@me":
            return _json(
                {
                    "id": str(self.bot_id),
                    "name": self.bot_name,
                    "description": "",
                    "icon": None,
                    "bot_public": True,
                    "bot_require_code_grant": False,
                    "verify_key": "00",
                    "owner": self.user_payload(1, "owner"),
                    "flags": 0,
                    "team": None,
                    "interactions_endpoint_url": None,
                }
            )
        if method == "GET" and path in ("/gateway", "/gateway/bot"):
            return _json(
                {
                    "url": self.gateway_url,
                    "shards": 1,
                    "session_start_limit": {
                        "total": 1000,
                        "remaining": 999,
                        "reset_after": 0,
                        "max_concurrency": 1,
                    },
                }
            )
        if method == "POST" and path == "/users/@me/channels":
            body = await request.json()
            cid = self.add_dm_channel(int(body["recipient_id"]))
            return _json(self.channels[cid])
        if parts[0] == "channels" and len(parts) >= 2 and parts[1].isdigit():
            cid = int(parts[1])
            rest = parts[2:]
            if method == "GET" and not rest:
                ch = self.channels.get(cid)
                return (
                    _json(ch)
                    if ch
                    else _json({"message": "Unknown Channel", "code": 10003}, status=404)
                )
            if method == "POST" and rest == ["typing"]:
                self.typing.append(cid)
                return web.Response(status=204)
            if method == "POST" and rest == ["messages"]:
                return await self._create_message(request, cid, call)
            if method == "GET" and len(rest) == 2 and rest[0] == "messages":
                m = self.messages.get(int(rest[1]))
                return (
                    _json(m)
                    if m
                    else _json({"message": "Unknown Message", "code": 10008}, status=404)
                )
            if method in ("PATCH", "DELETE") and len(rest) == 2 and rest[0] == "messages":
                return await self._change_message(request, method, cid, int(rest[1]))
            if (
                method == "PUT"
                and len(rest) == 5
                and rest[0] == "messages"
                and rest[2] == "reactions"
                and rest[4] == "@me"
            ):
                if int(rest[1]) not in self.messages:
                    return _json({"message": "Unknown Message", "code": 10008}, status=404)
                self.reactions.append(
                    {"channel_id": cid, "message_id": int(rest[1]), "emoji": rest[3]}
                )
                return web.Response(status=204)
        return _json({"message": "404: Not Found", "code": 0}, status=404)

    def bot_messages(self, channel_id: int) -> list[dict]:
        """The bot's messages that still exist in a channel (not deleted), oldest first."""
        return [
            m
            for m in self.messages.values()
            if m["channel_id"] == str(channel_id) and m["author"].get("id") == str(self.bot_id)
        ]

    async def _change_message(
        self, request: web.Request, method: str, cid: int, mid: int
    ) -> web.StreamResponse:
        """PATCH (edit) or DELETE one of the bot's messages."""
        msg = self.messages.get(mid)
        if msg is None or msg["channel_id"] != str(cid):
            return _json({"message": "Unknown Message", "code": 10008}, status=404)
        if msg["author"].get("id") != str(self.bot_id):
            return _json(
                {"message": "Cannot edit a message authored by another user", "code": 50005},
                status=403,
            )
        if method == "DELETE":
            del self.messages[mid]
            self.deleted.append(mid)
            return web.Response(status=204)
        body = await request.json()
        content = body.get("content")
        if content is not None:
            if not content and not msg["attachments"]:
                return _json({"message": "Cannot send an empty message", "code": 50006}, status=400)
            if len(content) > 2000:
                return _json({"message": "Invalid Form Body", "code": 50035}, status=400)
            msg["content"] = content
        msg["edited_timestamp"] = _now_iso()
        self.edits.append({"id": mid, "channel_id": cid, "content": msg["content"]})
        assert self._sent_cond is not None
        async with self._sent_cond:
            self._sent_cond.notify_all()
        return _json(msg)

    async def _create_message(self, request: web.Request, cid: int, call: dict) -> web.Response:
        ch = self.channels.get(cid)
        if ch is None:
            return _json({"message": "Unknown Channel", "code": 10003}, status=404)
        files: list[dict] = []
        if request.content_type.startswith("multipart/"):
            body: dict = {}
            reader = await request.multipart()
            async for part in reader:
                if part.name == "payload_json":
                    body = json.loads(await part.text())
                else:
                    files.append(
                        {"field": part.name, "filename": part.filename, "data": await part.read()}
                    )
        else:
            body = await request.json()
        nonce = body.get("nonce")
        if nonce is not None and body.get("enforce_nonce"):
            seen = self._nonces.get((cid, str(nonce)))
            if seen is not None and time.time() - seen[1] < NONCE_WINDOW:
                self.nonce_hits += 1
                return _json(self.messages[seen[0]])
        content = body.get("content") or ""
        if not content and not files:
            return _json({"message": "Cannot send an empty message", "code": 50006}, status=400)
        if len(content) > 2000:
            return _json({"message": "Invalid Form Body", "code": 50035}, status=400)
        ref = body.get("message_reference")
        guild_id = int(ch["guild_id"]) if ch.get("guild_id") else None
        atts = [
            {
                "id": str(self.new_id()),
                "filename": f["filename"],
                "size": len(f["data"]),
                "url": f"{self.base_url}/attachments/{cid}/{f['filename']}",
                "proxy_url": f"{self.base_url}/attachments/{cid}/{f['filename']}",
                "content_type": "application/octet-stream",
            }
            for f in files
        ]
        msg = self._message_payload(
            cid,
            content,
            self.user_payload(self.bot_id, self.bot_name, bot=True),
            guild_id=guild_id,
            reference=ref,
            attachments=atts,
        )
        self.messages[int(msg["id"])] = msg
        if nonce is not None and body.get("enforce_nonce"):
            self._nonces[(cid, str(nonce))] = (int(msg["id"]), time.time())
        record = {
            "id": int(msg["id"]),
            "channel_id": cid,
            "content": content,
            "message_reference": ref,
            "files": files,
            "body": body,
        }
        assert self._sent_cond is not None
        async with self._sent_cond:
            self.sent.append(record)
            self._sent_cond.notify_all()
        # Discord echoes our own messages over the gateway.
        await self.dispatch("MESSAGE_CREATE", msg)
        if self.send_delay:
            await asyncio.sleep(self.send_delay)  # created; the bot does not know yet
        return _json(msg)
