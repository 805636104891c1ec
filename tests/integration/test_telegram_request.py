"""AiohttpRequest (PTB's HTTP layer on aiohttp) against small raw servers on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import random
import socket

import pytest
from aiohttp import web
from telegram import Bot, InputFile
from telegram.error import NetworkError, TimedOut
from telegram.request import RequestData
from telegram.request._requestparameter import RequestParameter

from channels.telegram.request import AiohttpRequest
from tests.fakes.telegram import FakeTelegram

TOKEN = "123:SECRET-TOKEN"


class Server:
    """Records each request; ``delay`` holds answers; answers a Bot API style JSON body."""

    def __init__(self) -> None:
        self.requests: list[dict] = []
        self.delay = 0.0
        self.in_flight = 0
        self.runner: web.AppRunner | None = None
        self.url = ""

    async def handle(self, request: web.Request) -> web.Response:
        self.in_flight += 1
        try:
            entry: dict = {
                "path": request.path,
                "method": request.method,
                "content_type": request.content_type,
                "user_agent": request.headers.get("User-Agent", ""),
            }
            if request.content_type == "multipart/form-data":
                reader = await request.multipart()
                parts = {}
                async for part in reader:
                    parts[part.name] = {
                        "filename": part.filename,
                        "data": await part.read(),
                        "content_type": part.headers.get("Content-Type"),
                    }
                entry["parts"] = parts
            else:
                entry["form"] = dict(await request.post())
            self.requests.append(entry)
            if self.delay:
                await asyncio.sleep(self.delay)
            return web.json_response({"ok": True, "result": True})
        finally:
            self.in_flight -= 1

    async def start(self) -> None:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self.handle)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}"

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()


@pytest.fixture
async def server():
    s = Server()
    await s.start()
    yield s
    await s.stop()


@pytest.fixture
async def request_():
    r = AiohttpRequest(
        connection_pool_size=2,
        read_timeout=2.0,
        write_timeout=2.0,
        connect_timeout=2.0,
        pool_timeout=0.3,
    )
    await r.initialize()
    yield r
    await r.shutdown()


def _data(**params) -> RequestData:
    return RequestData([RequestParameter.from_input(k, v) for k, v in params.items()])


async def test_form_fields_reach_the_server(server, request_):
    result = await request_.post(
        f"{server.url}/bot{TOKEN}/sendMessage",
        request_data=_data(chat_id=42, text="héllo & bye", reply_parameters={"message_id": 7}),
    )
    assert result is True  # PTB parsed {"ok": true, "result": true}
    [req] = server.requests
    assert req["path"] == f"/bot{TOKEN}/sendMessage" and req["method"] == "POST"
    assert req["content_type"] == "application/x-www-form-urlencoded"
    assert req["form"]["chat_id"] == "42" and req["form"]["text"] == "héllo & bye"
    assert json.loads(req["form"]["reply_parameters"]) == {"message_id": 7}
    assert "python-telegram-bot" in req["user_agent"]


async def test_multipart_upload_keeps_the_file_name(server, request_):
    doc = InputFile(b"\x00\x01 bytes", filename='my notes "v2"\nété.txt')
    await request_.post(
        f"{server.url}/bot{TOKEN}/sendDocument", request_data=_data(chat_id=5, document=doc)
    )
    [req] = server.requests
    assert req["content_type"] == "multipart/form-data"
    assert req["parts"]["chat_id"]["data"] == b"5"
    [upload] = [p for name, p in req["parts"].items() if p["filename"]]
    assert upload["data"] == b"\x00\x01 bytes"
    assert upload["filename"] == 'my notes "v2" été.txt'  # not percent-encoded, no line break


async def test_through_ptb_bot(server):
    """The whole PTB stack on top: Bot.get_me-style call goes out and its JSON comes back."""
    req = AiohttpRequest()
    bot = Bot(
        TOKEN, base_url=f"{server.url}/bot", request=req, get_updates_request=AiohttpRequest()
    )
    await req.initialize()
    try:
        assert await bot.send_chat_action(chat_id=1, action="typing") is True
    finally:
        await req.shutdown()
    assert server.requests[0]["path"] == f"/bot{TOKEN}/sendChatAction"


async def test_read_timeout_is_timed_out(server, request_):
    server.delay = 1.0
    with pytest.raises(TimedOut):
        await request_.do_request(f"{server.url}/bot{TOKEN}/x", "POST", read_timeout=0.1)


async def test_refused_connection_is_a_retryable_network_error_without_token(request_):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(NetworkError) as info:
        await request_.do_request(f"http://127.0.0.1:{port}/bot{TOKEN}/getMe", "POST")
    assert not isinstance(info.value, TimedOut)  # nothing was sent: the adapter may retry
    assert "SECRET" not in str(info.value) and info.value.__cause__ is None


async def test_busy_pool_times_out_without_sending(server, request_):
    """Waiting for a free connection is bounded by pool + connect timeout (0.3 + 0.2 s here)."""
    request_ = AiohttpRequest(connection_pool_size=2, connect_timeout=0.2, pool_timeout=0.3)
    await request_.initialize()
    server.delay = 1.0
    busy = [
        asyncio.ensure_future(request_.do_request(f"{server.url}/slow{i}", "POST"))
        for i in range(2)
    ]
    while server.in_flight < 2:
        await asyncio.sleep(0.01)
    with pytest.raises(TimedOut, match="not sent"):
        await request_.do_request(f"{server.url}/third", "POST")
    assert sorted(r["path"] for r in server.requests) == [
        "/slow0",
        "/slow1",
    ]  # the third never arrived
    await asyncio.gather(*busy)
    await request_.shutdown()


async def test_cancelled_requests_give_their_connection_back():
    """Cancelling a call mid-flight (a typing indicator when a turn ends, a stop) frees its slot.

    PTB's stock HTTPXRequest fails this: the same loop leaves its pool full, and the last
    call raises "Pool timeout" (bench/typing_cancel_leak.py shows it).
    """
    tg = FakeTelegram(token=TOKEN)
    await tg.start()
    req = AiohttpRequest(connection_pool_size=2, pool_timeout=1.0, connect_timeout=1.0)
    bot = Bot(TOKEN, base_url=f"{tg.api_base}/bot", request=req)
    await bot.initialize()
    rng = random.Random(7)
    try:
        for _ in range(400):
            task = asyncio.ensure_future(bot.send_chat_action(chat_id=1, action="typing"))
            await asyncio.sleep(rng.random() * 0.003)
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        sent = await bot.send_message(chat_id=1, text="after")
        assert sent.text == "after"
    finally:
        await bot.shutdown()
        await tg.stop()


async def test_not_initialized_or_shut_down(server):
    r = AiohttpRequest()
    with pytest.raises(RuntimeError):
        await r.do_request(f"{server.url}/x", "POST")
    await r.initialize()
    await r.shutdown()
    await r.shutdown()  # idempotent
    with pytest.raises(RuntimeError):
        await r.do_request(f"{server.url}/x", "POST")


async def test_proxy_from_the_environment(server, monkeypatch):
    """HTTPS_PROXY/NO_PROXY are honoured like httpx does, read once per host; loopback is direct."""
    monkeypatch.setenv("HTTP_PROXY", server.url)
    monkeypatch.setenv("NO_PROXY", "direct.example")
    r = AiohttpRequest()
    assert r._proxy_for("http://api.example/bot1:x/getMe") == server.url
    assert r._proxy_for("http://direct.example/bot1:x/getMe") is None
    assert r._proxy_for(f"{server.url}/bot1:x/getMe") is None  # 127.0.0.1: never proxied
    monkeypatch.setenv("ALL_PROXY", "proxy.lan:3128")  # no scheme: http://
    assert AiohttpRequest()._proxy_for("https://api.telegram.org/x") == "http://proxy.lan:3128"
    # through the proxy for real: the "proxy" (our server) gets the absolute-form request
    await r.initialize()
    try:
        status, _ = await r.do_request("http://api.example/bot1:x/getMe", "POST")
    finally:
        await r.shutdown()
    assert status == 200 and server.requests[-1]["path"] == "/bot1:x/getMe"
