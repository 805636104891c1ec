"""A stopped turn of the OpenAI-compatible HTTP API (SPEC §13, §17.1), through the real daemon,
the official ``openai`` SDK and the fake LLM.

The caller of a stopped request gets an empty assistant message with ``finish_reason`` "stop"
(§17.1: nothing is delivered for a stopped turn, no partial text, no error; a status the SDK
retries would run the stopped turn again).  The stopped user message is kept once: the
client's next request, with or without the empty answer, does not add it a second time.  A
``/stop`` that arrives while the request's image is still being fetched stops the turn too:
the model is never asked."""

from __future__ import annotations

import asyncio
import contextlib
import json

from aiohttp import web

from tests.e2e.test_openai_api import api
from tests.fakes.llm import delay, text
from tests.fakes.media_samples import image_bytes
from tests.fakes.web import serve

KEY = "agent:main:http:bob"


def _ask(client, *messages: dict, **kw):
    return client.chat.completions.create(model="chela", messages=list(messages), user="bob", **kw)


def _user(words: str) -> dict:
    return {"role": "user", "content": words}


async def _stop_over_the_api(client) -> str:
    r = await _ask(client, _user("/stop"))
    return r.choices[0].message.content


def _user_texts(request: dict) -> list[str]:
    return [json.dumps(m) for m in request["messages"][1:] if m["role"] == "user"]


async def test_a_stopped_api_turn_answers_empty_and_the_next_request_lines_up(
    tmp_path, llm, monkeypatch
):
    llm.script(delay(4, then=text("too late")), text("Here you are"))
    async with api(tmp_path, llm, monkeypatch) as (d, client):
        call = asyncio.ensure_future(_ask(client, _user("write me an essay")))
        await llm.wait_for_requests(1, timeout=15)
        assert await _stop_over_the_api(client) == "Stopped."
        r = await asyncio.wait_for(call, 10)
        assert r.choices[0].message.content == "" and r.choices[0].finish_reason == "stop"
        assert [m["role"] for m in d.store.history(KEY, limit=50, max_chars=10**6)] == ["user"]
        # the client keeps the empty answer in its conversation and goes on
        r = await _ask(
            client,
            _user("write me an essay"),
            {"role": "assistant", "content": ""},
            _user("a haiku then"),
        )
        assert r.choices[0].message.content == "Here you are"
    told = _user_texts(llm.requests[1])
    assert sum("write me an essay" in t for t in told) == 1, told  # not appended twice
    assert "a haiku then" in told[-1] and "too late" not in json.dumps(llm.requests[1])


async def test_a_client_that_drops_the_empty_answer_also_lines_up(tmp_path, llm, monkeypatch):
    llm.script(delay(4, then=text("too late")), text("Here you are"))
    async with api(tmp_path, llm, monkeypatch) as (d, client):
        call = asyncio.ensure_future(_ask(client, _user("write me an essay")))
        await llm.wait_for_requests(1, timeout=15)
        assert await d.conversation.stop(KEY) is True  # the UI's Stop
        assert (await asyncio.wait_for(call, 10)).choices[0].message.content == ""
        r = await _ask(client, _user("write me an essay"), _user("a haiku then"))
        assert r.choices[0].message.content == "Here you are"
        roles = [m["role"] for m in d.store.history(KEY, limit=50, max_chars=10**6)]
    assert roles == ["user", "user", "assistant"]  # the session went on, not afresh
    assert sum("write me an essay" in t for t in _user_texts(llm.requests[1])) == 1


async def test_a_stopped_streaming_request_ends_with_stop_and_no_error(tmp_path, llm, monkeypatch):
    llm.script(delay(4, then=text("too late")))
    async with api(tmp_path, llm, monkeypatch) as (d, client):

        async def read() -> list:
            stream = await _ask(client, _user("write me an essay"), stream=True)
            return [c async for c in stream]

        call = asyncio.ensure_future(read())
        await llm.wait_for_requests(1, timeout=15)
        assert await d.conversation.stop(KEY) is True
        chunks = await asyncio.wait_for(call, 10)
    finish = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert finish[-1] == "stop"
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == ""


@contextlib.asynccontextmanager
async def held_image():
    """An image server whose answer waits until released: the turn's preparation hangs."""
    release, asked = asyncio.Event(), asyncio.Event()

    async def image(request: web.Request) -> web.Response:
        asked.set()
        await release.wait()
        return web.Response(body=image_bytes(64, 64, fmt="PNG"), content_type="image/png")

    app = web.Application()
    app.router.add_get("/slow.png", image)
    runner, port = await serve(app)
    try:
        yield f"http://127.0.0.1:{port}/slow.png", asked, release
    finally:
        release.set()
        await runner.cleanup()


def _with_image(url: str) -> dict:
    return {
        "role": "user",
        "content": [
            {"type": "text", "text": "what is in this picture"},
            {"type": "image_url", "image_url": {"url": url}},
        ],
    }


SECTIONS = {"media": {"vision": "on"}, "tools": {"web": {"allow_private_hosts": ["127.0.0.1"]}}}


async def test_stop_while_the_image_is_fetched_stops_the_turn(tmp_path, llm, monkeypatch):
    llm.script(text("a picture of nothing"), text("Here you are"))
    async with (
        held_image() as (url, asked, _release),
        api(tmp_path, llm, monkeypatch, **SECTIONS) as (d, client),
    ):
        call = asyncio.ensure_future(_ask(client, _with_image(url)))
        await asyncio.wait_for(asked.wait(), 15)
        assert d.conversation.runner.running(KEY)
        assert await _stop_over_the_api(client) == "Stopped."
        r = await asyncio.wait_for(call, 10)
        assert r.choices[0].message.content == "" and r.choices[0].finish_reason == "stop"
        history = d.store.history(KEY, limit=50, max_chars=10**6)
        assert [m["role"] for m in history] == ["user"]
        assert "what is in this picture" in history[0]["content"]
        assert llm.requests == []  # the model was never asked
        r = await _ask(client, _user("and now?"))  # the session goes on as usual
        assert r.choices[0].message.content == "a picture of nothing"
    assert len(llm.requests) == 1


async def test_the_held_image_once_fetched_is_answered(tmp_path, llm, monkeypatch):
    # the twin: without a stop the slow image is read and the turn answered
    llm.script(text("a small picture"))
    async with (
        held_image() as (url, asked, release),
        api(tmp_path, llm, monkeypatch, **SECTIONS) as (_d, client),
    ):
        call = asyncio.ensure_future(_ask(client, _with_image(url)))
        await asyncio.wait_for(asked.wait(), 15)
        release.set()
        r = await asyncio.wait_for(call, 15)
    assert r.choices[0].message.content == "a small picture"
    assert len(llm.image_parts[0]) == 1
