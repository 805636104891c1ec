"""The HTTP API's error answers as clients meet them (issue 27 #2, #5, #11).

#2: a request in flight when the daemon stops is an error (503, OpenAI's error shape; a
stream ends with an error event), never a 200 with empty content; its twin: a request that
finishes during the drain is answered normally.
#11: a wrong token is an authentication error for the ``openai`` SDK and for litellm.
#5: a listen address already taken fails ``start`` at once, naming host:port."""

from __future__ import annotations

import asyncio
import errno
import json
import socket
import time

import aiohttp
import openai
import pytest

from bot.app.timeouts import Timeouts
from channels.http import HttpChannel
from tests.e2e import make_config
from tests.fakes.llm import delay, text

TOKEN = "test-api-token-0123456789"
FAST = Timeouts(drain=0.5, outbox_grace=0.5, channel_stop=2.0)


async def _daemon(tmp_path, llm, monkeypatch, timeouts: Timeouts = FAST):
    from bot.app.daemon import Daemon

    monkeypatch.setenv("TEST_HTTP_TOKEN", TOKEN)
    http = {"enabled": True, "listen": "127.0.0.1:0", "token_env": "TEST_HTTP_TOKEN"}
    d = Daemon(make_config(tmp_path, llm, channels={"http": http}), timeouts=timeouts)
    await d.start()
    return d, f"http://127.0.0.1:{d.channels['http'].bound_port}/v1"


def _body(stream: bool) -> dict:
    return {"model": "chela", "messages": [{"role": "user", "content": "hi"}], "stream": stream}


async def _post(url: str, body: dict) -> tuple[int, str]:
    async with aiohttp.ClientSession() as s:
        auth = {"Authorization": f"Bearer {TOKEN}"}
        async with s.post(f"{url}/chat/completions", json=body, headers=auth) as resp:
            return resp.status, await resp.text()


def _sse_events(raw: str) -> list:
    out = []
    for line in raw.splitlines():
        if line.startswith("data: "):
            data = line[len("data: ") :]
            out.append(data if data == "[DONE]" else json.loads(data))
    return out


@pytest.mark.parametrize("stream", [False, True])
async def test_a_request_in_flight_at_stop_is_a_503_not_an_empty_200(
    tmp_path, llm, monkeypatch, stream
):
    llm.script(delay(3, text("too late")))  # the model is slower than the drain
    d, url = await _daemon(tmp_path, llm, monkeypatch)
    try:
        req = asyncio.ensure_future(_post(url, _body(stream)))
        await llm.wait_for_requests(1)
        started = time.monotonic()
        await d.stop()
        status, raw = await asyncio.wait_for(req, 10)
    finally:
        await d.stop()
    assert time.monotonic() - started < 8
    assert status == 503, (status, raw)
    err = json.loads(raw)["error"]
    assert err["code"] == "shutting_down" and err["type"] == "server_error"
    assert err["message"]


async def test_a_stream_cut_by_stop_after_text_ends_with_an_error_event(tmp_path, llm, monkeypatch):
    from tests.fakes.llm import streamed

    gate = asyncio.Event()  # never set: the stream stops after its first chunk
    llm.script(streamed("Once upon", " a time", gate=gate))
    d, url = await _daemon(tmp_path, llm, monkeypatch)
    try:
        req = asyncio.ensure_future(_post(url, _body(True)))
        await llm.wait_for_requests(1)
        await asyncio.sleep(0.5)  # the first chunk reaches the client
        await d.stop()
        status, raw = await asyncio.wait_for(req, 10)
    finally:
        gate.set()
        await d.stop()
    assert status == 200  # the SSE response had opened
    events = _sse_events(raw)
    assert any(
        c["choices"] and c["choices"][0]["delta"].get("content") == "Once upon"
        for c in events
        if isinstance(c, dict)
    ), raw
    errors = [c["error"] for c in events if isinstance(c, dict) and "error" in c]
    assert errors and errors[-1]["code"] == "shutting_down", raw
    stops = [
        c
        for c in events
        if isinstance(c, dict) and c["choices"] and c["choices"][0]["finish_reason"]
    ]
    assert not stops, raw  # never a finish_reason "stop" for a cut answer


@pytest.mark.parametrize("stream", [False, True])
async def test_twin_a_request_answered_during_the_drain_is_a_normal_200(
    tmp_path, llm, monkeypatch, stream
):
    llm.script(delay(0.3, text("just in time")))
    d, url = await _daemon(tmp_path, llm, monkeypatch, Timeouts(drain=5.0))
    try:
        req = asyncio.ensure_future(_post(url, _body(stream)))
        await llm.wait_for_requests(1)
        await d.stop()
        status, raw = await asyncio.wait_for(req, 10)
    finally:
        await d.stop()
    assert status == 200, raw
    if stream:
        events = _sse_events(raw)
        said = "".join(
            c["choices"][0]["delta"].get("content") or ""
            for c in events
            if isinstance(c, dict) and c["choices"]
        )
        assert said == "just in time" and events[-1] == "[DONE]"
    else:
        answer = json.loads(raw)["choices"][0]
        assert answer["message"]["content"] == "just in time"
        assert answer["finish_reason"] == "stop"


# ----------------------------------------------------------------------- #11: the 401
async def test_a_wrong_token_is_an_authentication_error_for_the_openai_sdk(
    tmp_path, llm, monkeypatch
):
    d, url = await _daemon(tmp_path, llm, monkeypatch)
    try:
        bad = openai.AsyncOpenAI(base_url=url, api_key="wrong-token", max_retries=0)
        with pytest.raises(openai.AuthenticationError) as e:
            await bad.chat.completions.create(
                model="chela", messages=[{"role": "user", "content": "hi"}]
            )
        await bad.close()
        assert e.value.status_code == 401
        assert e.value.body["type"] == "authentication_error"
        assert e.value.body["code"] == "invalid_api_key"
        # twin: the right token works
        llm.script(text("welcome"))
        good = openai.AsyncOpenAI(base_url=url, api_key=TOKEN, max_retries=0)
        r = await good.chat.completions.create(
            model="chela", messages=[{"role": "user", "content": "hi"}]
        )
        await good.close()
        assert r.choices[0].message.content == "welcome"
    finally:
        await d.stop()


async def test_a_wrong_token_is_an_authentication_error_for_litellm(tmp_path, llm, monkeypatch):
    import litellm

    d, url = await _daemon(tmp_path, llm, monkeypatch)
    try:
        with pytest.raises(litellm.AuthenticationError):
            await litellm.acompletion(
                model="openai/chela",
                api_base=url,
                api_key="wrong-token",
                messages=[{"role": "user", "content": "hi"}],
                num_retries=0,
            )
        llm.script(text("welcome"))
        r = await litellm.acompletion(
            model="openai/chela",
            api_base=url,
            api_key=TOKEN,
            messages=[{"role": "user", "content": "hi"}],
            num_retries=0,
        )
        assert r.choices[0].message.content == "welcome"
    finally:
        await d.stop()


# ------------------------------------------------------------------ #5: the port taken
async def test_a_taken_port_fails_start_at_once_naming_the_address():
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    port = holder.getsockname()[1]
    ch = HttpChannel(host="127.0.0.1", port=port, token=TOKEN)

    async def sink(msg):  # pragma: no cover - never called
        pass

    try:
        started = time.monotonic()
        with pytest.raises(OSError) as e:
            await asyncio.wait_for(ch.start(sink), 5)
        assert time.monotonic() - started < 1
        assert e.value.errno == errno.EADDRINUSE
        assert f"127.0.0.1:{port}" in str(e.value) and "in use" in str(e.value)
        # twin: once the port is free the same channel starts and serves
        holder.close()
        await ch.start(sink)
        assert ch.bound_port == port
    finally:
        holder.close()
        await ch.stop()
