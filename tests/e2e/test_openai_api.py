"""The OpenAI-compatible HTTP API (SPEC §13) with real clients: the official ``openai`` SDK
and litellm, against the daemon (HTTP channel on 127.0.0.1) and the fake LLM.

Streaming rows (plain streaming, ``stream_options.include_usage``) live with the streaming
work (tests/e2e/test_e2e_http.py and the streaming tests)."""

from __future__ import annotations

import base64
import contextlib
import json

import aiohttp
import openai
import pytest

from bot.conversation.api import NO_RESULT, digest, seen_count
from tests.e2e import make_config, running
from tests.fakes.llm import always, error, image_urls, text, tool_calls, usage
from tests.fakes.media_samples import image_bytes

TOKEN = "test-api-token-0123456789"

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}


@contextlib.asynccontextmanager
async def api(tmp_path, llm, monkeypatch, **sections):
    monkeypatch.setenv("TEST_HTTP_TOKEN", TOKEN)
    http = {"enabled": True, "listen": "127.0.0.1:0", "token_env": "TEST_HTTP_TOKEN"}
    cfg = make_config(tmp_path, llm, channels={"http": http}, **sections)
    async with running(cfg) as d:
        base = f"http://127.0.0.1:{d.channels['http'].bound_port}/v1"
        client = openai.AsyncOpenAI(base_url=base, api_key=TOKEN, max_retries=0)
        try:
            yield d, client
        finally:
            await client.close()


def model_messages(request: dict) -> list[dict]:
    """The model request's messages after the system prompt."""
    return request["messages"][1:]


def contents(request: dict) -> str:
    return json.dumps(model_messages(request), ensure_ascii=False)


# ------------------------------------------------------------------------------ basics
async def test_plain_completion_with_real_usage(tmp_path, llm, monkeypatch):
    async with api(tmp_path, llm, monkeypatch) as (d, client):
        llm.script(text("Hello from Chela", usage=usage(123, 45, cached=20)))
        r = await client.chat.completions.create(
            model="gpt-4o", messages=[{"role": "user", "content": "hi"}]
        )
        assert r.choices[0].message.content == "Hello from Chela"
        assert r.choices[0].finish_reason == "stop"
        assert r.model == "gpt-4o"  # any model name is served
        assert (r.usage.prompt_tokens, r.usage.completion_tokens, r.usage.total_tokens) == (
            123,
            45,
            168,
        )
        assert r.usage.prompt_tokens_details.cached_tokens == 20
        # the numbers are the usage table's for that turn
        rows = [x for x in d.store.usage_rows(0) if ":http-stateless:" in x["session_key"]]
        assert [(x["prompt_tokens"], x["completion_tokens"]) for x in rows] == [(123, 45)]
        assert "hi" in llm.requests[0]["messages"][-1]["content"]


async def test_usage_adds_up_every_model_call_of_the_turn(tmp_path, llm, monkeypatch):
    async with api(tmp_path, llm, monkeypatch) as (_d, client):
        (tmp_path / "ws").mkdir(exist_ok=True)
        (tmp_path / "ws" / "note.txt").write_text("the note")
        llm.script(
            tool_calls([("read", {"path": "note.txt"})], usage=usage(100, 10)),
            text("It says: the note", usage=usage(150, 20)),
        )
        r = await client.chat.completions.create(
            model="chela", messages=[{"role": "user", "content": "read note.txt"}]
        )
        assert r.choices[0].message.content == "It says: the note"
        assert r.choices[0].message.tool_calls is None  # Chela's own tools are not shown
        assert (r.usage.prompt_tokens, r.usage.completion_tokens) == (250, 30)


async def test_system_message_becomes_client_instructions(tmp_path, llm, monkeypatch):
    async with api(tmp_path, llm, monkeypatch) as (_d, client):
        llm.script(text("plain"), text("Arr"))
        await client.chat.completions.create(
            model="chela", messages=[{"role": "user", "content": "hi"}]
        )
        await client.chat.completions.create(
            model="chela",
            messages=[
                {"role": "system", "content": "Answer like a pirate."},
                {"role": "developer", "content": [{"type": "text", "text": "Be brief."}]},
                {"role": "user", "content": "hi"},
            ],
        )
    plain, with_client = (r["messages"][0]["content"] for r in llm.requests)
    assert "Client Instructions" not in plain
    # the cached prompt is unchanged; the client's block comes after all of its sections
    assert with_client.startswith(plain)
    assert with_client[len(plain) :] == (
        "\n## Client Instructions\nAnswer like a pirate.\n\nBe brief."
    )
    # the client's system messages are not part of the conversation
    assert [m["role"] for m in model_messages(llm.requests[1])] == ["user"]


# ----------------------------------------------------------------------------- sessions
async def test_requests_without_user_are_stateless(tmp_path, llm, monkeypatch):
    async with api(tmp_path, llm, monkeypatch) as (d, client):
        llm.script(text("first answer"), text("second answer"), text("third answer"))
        await client.chat.completions.create(
            model="chela", messages=[{"role": "user", "content": "remember banana"}]
        )
        await client.chat.completions.create(
            model="chela", messages=[{"role": "user", "content": "what fruit?"}]
        )
        # the client's own history is the conversation
        await client.chat.completions.create(
            model="chela",
            messages=[
                {"role": "user", "content": "remember cherry"},
                {"role": "assistant", "content": "ok, cherry"},
                {"role": "user", "content": "what fruit?"},
            ],
        )
        # never the owner's main conversation
        assert d.store.message_count("agent:main:main") == 0
    assert "banana" not in contents(llm.requests[1])
    assert [m["role"] for m in model_messages(llm.requests[1])] == ["user"]
    third = model_messages(llm.requests[2])
    assert [m["role"] for m in third] == ["user", "assistant", "user"]
    assert third[0]["content"] == "remember cherry" and third[1]["content"] == "ok, cherry"
    assert "what fruit?" in third[2]["content"] and "banana" not in contents(llm.requests[2])


async def test_user_continues_its_session_without_duplicates(tmp_path, llm, monkeypatch):
    async with api(tmp_path, llm, monkeypatch) as (d, client):
        llm.script(text("A1"), text("A2"), text("A3"), text("A2 again"))
        convo = [{"role": "user", "content": "Q1"}]
        r = await client.chat.completions.create(model="chela", messages=convo, user="alice")
        # the client sends the whole conversation: only Q2 is new
        convo += [{"role": "assistant", "content": r.choices[0].message.content}]
        convo += [{"role": "user", "content": "Q2"}]
        await client.chat.completions.create(
            model="chela",
            messages=[{"role": "system", "content": "be nice"}, *convo],
            user="alice",
        )
        # a client that sends only the new message continues the same conversation
        await client.chat.completions.create(
            model="chela", messages=[{"role": "user", "content": "Q3"}], user="alice"
        )
        key = "agent:main:http:alice"
        assert d.store.message_count(key) == 6  # Q1 A1 Q2 A2 Q3 A3, each once
        # another user has a conversation of its own
        llm.script(text("B1"))
        await client.chat.completions.create(
            model="chela", messages=[{"role": "user", "content": "hello"}], user="bob"
        )
        assert "Q1" not in contents(llm.requests[3])
        # editing an earlier message forks the conversation: it starts again from the
        # client's messages
        await client.chat.completions.create(
            model="chela",
            messages=[*convo[:2], {"role": "user", "content": "Q2 edited"}],
            user="alice",
        )
        assert d.store.message_count(key) == 4  # Q1 A1 Q2' A2', in a new epoch
    second = contents(llm.requests[1])
    assert second.count("Q1") == 1 and second.count("A1") == 1
    third = contents(llm.requests[2])
    assert [third.count(x) for x in ("Q1", "A1", "Q2", "A2", "Q3")] == [1, 1, 1, 1, 1]
    forked = contents(llm.requests[4])
    assert forked.count("Q1") == 1 and "Q2 edited" in forked
    assert "Q3" not in forked and "A2" not in forked


@pytest.mark.parametrize(
    ("client", "seen", "expected"),
    [
        (["u1"], [], 0),
        (["u1", "a1", "u2"], ["u1", "a1"], 2),  # the whole conversation again
        (["a1", "u2"], ["u1", "a1"], 1),  # a sliding window
        (["u2"], ["u1", "a1"], 0),  # only the new message
        (["u1", "a1", "u2"], ["x", "y"], 0),  # nothing lines up
        (["u2", "a2", "u3"], ["u1", "a1", "u2", "a2"], 2),  # window over a long record
        (["u1", "a1", "u2", "a2", "u3"], ["u2", "a2"], 4),  # record shorter than history
        (["u1", "a1", "u2"], ["u1", "a1", "u2", "a2"], 0),  # a regenerate: no suffix lines up
    ],
)
def test_seen_count(client, seen, expected):
    assert seen_count(client, seen) == expected


def test_digest_ignores_what_clients_change():
    base = {"role": "assistant", "content": "hi"}
    assert digest(base) == digest({**base, "content": " hi \n", "name": "x"})
    assert digest(base) != digest({"role": "user", "content": "hi"})
    calls = [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]
    assert digest({**base, "tool_calls": calls}) != digest(base)


# ------------------------------------------------------------------------- client tools
async def test_client_tool_round_trip_with_tool_choice(tmp_path, llm, monkeypatch):
    async with api(tmp_path, llm, monkeypatch) as (_d, client):
        choice = {"type": "function", "function": {"name": "get_weather"}}
        llm.script(tool_calls([("get_weather", {"city": "Paris"}, "call_w1")]))
        messages: list = [{"role": "user", "content": "Weather in Paris?"}]
        r = await client.chat.completions.create(
            model="chela", messages=messages, tools=[WEATHER], tool_choice=choice
        )
        assert r.choices[0].finish_reason == "tool_calls"
        (call,) = r.choices[0].message.tool_calls
        assert (call.id, call.function.name) == ("call_w1", "get_weather")
        assert json.loads(call.function.arguments) == {"city": "Paris"}
        first = llm.requests[0]
        names = {t["function"]["name"] for t in first["tools"]}
        assert "get_weather" in names and "read" in names  # beside Chela's own tools
        assert first["tool_choice"] == choice
        # the follow-up with the tool's result continues the turn
        llm.script(text("Sunny, 24 °C"))
        messages += [
            r.choices[0].message.model_dump(exclude_none=True),
            {"role": "tool", "tool_call_id": "call_w1", "content": "sunny, 24C"},
        ]
        r2 = await client.chat.completions.create(model="chela", messages=messages, tools=[WEATHER])
        assert r2.choices[0].message.content == "Sunny, 24 °C"
        assert r2.choices[0].finish_reason == "stop"
    follow = model_messages(llm.requests[1])
    assert [m["role"] for m in follow] == ["user", "assistant", "tool"]
    assert follow[1]["tool_calls"][0]["id"] == "call_w1"
    assert follow[2] == {"role": "tool", "tool_call_id": "call_w1", "content": "sunny, 24C"}
    assert "tool_choice" not in llm.requests[1]


async def test_client_tool_beside_own_tool_in_a_user_session(tmp_path, llm, monkeypatch):
    async with api(tmp_path, llm, monkeypatch) as (_d, client):
        (tmp_path / "ws").mkdir(exist_ok=True)
        (tmp_path / "ws" / "city.txt").write_text("Lyon")
        llm.script(
            tool_calls(
                [
                    ("read", {"path": "city.txt"}, "own_1"),
                    ("get_weather", {"city": "Lyon"}, "cli_1"),
                ]
            ),
        )
        messages: list = [{"role": "user", "content": "Weather where I live?"}]
        r = await client.chat.completions.create(
            model="chela", messages=messages, tools=[WEATHER], user="carol"
        )
        # only the client's call is shown; Chela's own ran
        assert [c.id for c in r.choices[0].message.tool_calls] == ["cli_1"]
        llm.script(text("Rainy in Lyon"))
        messages += [
            r.choices[0].message.model_dump(exclude_none=True),
            {"role": "tool", "tool_call_id": "cli_1", "content": "rain"},
        ]
        r2 = await client.chat.completions.create(
            model="chela", messages=messages, tools=[WEATHER], user="carol"
        )
        assert r2.choices[0].message.content == "Rainy in Lyon"
        # the client abandons a tool call: the next question still works
        llm.script(tool_calls([("get_weather", {"city": "Oslo"}, "cli_2")]), text("Fine."))
        await client.chat.completions.create(
            model="chela",
            messages=[{"role": "user", "content": "And Oslo?"}],
            tools=[WEATHER],
            user="carol",
        )
        await client.chat.completions.create(
            model="chela", messages=[{"role": "user", "content": "never mind"}], user="carol"
        )
    follow = model_messages(llm.requests[1])
    assert [m["role"] for m in follow] == ["user", "assistant", "tool", "tool"]
    assert [c["id"] for c in follow[1]["tool_calls"]] == ["own_1", "cli_1"]
    assert follow[2]["tool_call_id"] == "own_1" and "Lyon" in follow[2]["content"]
    assert follow[3] == {"role": "tool", "tool_call_id": "cli_1", "content": "rain"}
    last = model_messages(llm.requests[3])
    unanswered = [m for m in last if m.get("tool_call_id") == "cli_2"]
    assert unanswered == [{"role": "tool", "tool_call_id": "cli_2", "content": NO_RESULT}]
    assert last[-1]["role"] == "user" and "never mind" in last[-1]["content"]
    assert last.count(follow[3]) == 1  # the earlier result is not duplicated


async def test_client_tool_errors_are_400(tmp_path, llm, monkeypatch):
    async with api(tmp_path, llm, monkeypatch) as (_d, client):
        clash = {"type": "function", "function": {"name": "read", "parameters": {}}}
        with pytest.raises(openai.BadRequestError, match="own tools"):
            await client.chat.completions.create(
                model="chela", messages=[{"role": "user", "content": "x"}], tools=[clash]
            )
        with pytest.raises(openai.BadRequestError, match="no assistant message asked"):
            await client.chat.completions.create(
                model="chela",
                messages=[
                    {"role": "user", "content": "x"},
                    {"role": "tool", "tool_call_id": "nope", "content": "r"},
                ],
            )
        with pytest.raises(openai.BadRequestError, match="tool_choice"):
            await client.chat.completions.create(
                model="chela",
                messages=[{"role": "user", "content": "x"}],
                tools=[WEATHER],
                tool_choice="sometimes",  # type: ignore[arg-type]
            )
        assert llm.requests == []
        # the twin: a valid tool list reaches the model
        llm.script(text("ok"))
        r = await client.chat.completions.create(
            model="chela", messages=[{"role": "user", "content": "x"}], tools=[WEATHER]
        )
        assert r.choices[0].message.content == "ok"


# ------------------------------------------------------------------- parameters, media
async def test_model_parameters_reach_the_model(tmp_path, llm, monkeypatch):
    async with api(tmp_path, llm, monkeypatch) as (_d, client):
        llm.script(text('{"a": 1}'), text("short"))
        fmt = {"type": "json_object"}
        await client.chat.completions.create(
            model="chela",
            messages=[{"role": "user", "content": "json please"}],
            max_tokens=50,
            temperature=0.2,
            top_p=0.9,
            stop=["END"],
            seed=7,
            response_format=fmt,
        )
        await client.chat.completions.create(
            model="chela",
            messages=[{"role": "user", "content": "x"}],
            max_completion_tokens=33,
        )
        with pytest.raises(openai.BadRequestError, match="temperature"):
            await client.chat.completions.create(
                model="chela", messages=[{"role": "user", "content": "x"}], temperature=7
            )
    first, second = llm.requests
    assert first["max_tokens"] == 50 and first["temperature"] == 0.2 and first["top_p"] == 0.9
    assert first["stop"] == ["END"] and first["seed"] == 7
    assert first["response_format"] == fmt
    assert second["max_completion_tokens"] == 33
    assert "temperature" not in second


async def test_image_part_reaches_the_model(tmp_path, llm, monkeypatch):
    png = image_bytes(16, 16, fmt="PNG")
    url = "data:image/png;base64," + base64.b64encode(png).decode()
    async with api(tmp_path, llm, monkeypatch, media={"vision": "on"}) as (_d, client):
        llm.script(text("a small square"))
        r = await client.chat.completions.create(
            model="chela",
            messages=[
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "what is this?"},
                        {"type": "image_url", "image_url": {"url": url}},
                    ],
                }
            ],
        )
        assert r.choices[0].message.content == "a small square"
    (sent,) = image_urls(llm.requests[0])
    assert sent.startswith("data:image/")
    assert "what is this?" in contents(llm.requests[0])


async def test_a_phone_sized_photo_as_a_data_url_is_accepted_and_resized(
    tmp_path, llm, monkeypatch
):
    """A camera photo of several MB, base64-encoded, fits the body limit (it used to be 4 MB)."""
    photo = image_bytes(2400, 1800, fmt="PNG", noise=True)
    assert len(photo) > 4 * 1024 * 1024  # over the old limit
    url = "data:image/png;base64," + base64.b64encode(photo).decode()
    async with api(tmp_path, llm, monkeypatch, media={"vision": "on"}) as (_d, client):
        llm.script(text("a noisy picture"))
        r = await client.chat.completions.create(
            model="chela",
            messages=[
                {
                    "role": "user",
                    "content": [{"type": "image_url", "image_url": {"url": url}}],
                }
            ],
        )
        assert r.choices[0].message.content == "a noisy picture"
    (sent,) = image_urls(llm.requests[0])
    assert sent.startswith("data:image/") and len(sent) < len(url)  # resized before the model


# ---------------------------------------------------------------------- errors, models
async def test_auth_model_errors_and_models(tmp_path, llm, monkeypatch):
    async with api(tmp_path, llm, monkeypatch) as (d, client):
        base = str(client.base_url).rstrip("/")
        wrong = openai.AsyncOpenAI(base_url=base, api_key="wrong-token", max_retries=0)
        with pytest.raises(openai.AuthenticationError):
            await wrong.chat.completions.create(
                model="chela", messages=[{"role": "user", "content": "hi"}]
            )
        with pytest.raises(openai.AuthenticationError):
            await wrong.models.list()
        await wrong.close()
        assert llm.requests == []
        model_id = d.channels["http"].model_name
        listed = await client.models.list()
        assert [m.id for m in listed.data] == [model_id]
        got = await client.models.retrieve(model_id)
        assert got.id == model_id and got.owned_by == "chela"
        with pytest.raises(openai.NotFoundError):
            await client.models.retrieve("no-such-model")
        # the provider is down: 502, never a 200 with the error as content
        llm.default = always(error(500))
        with pytest.raises(openai.APIStatusError) as e:
            await client.chat.completions.create(
                model="chela", messages=[{"role": "user", "content": "hi"}]
            )
        assert e.value.status_code == 502
        assert e.value.body["code"] == "model_error"
        # and once it is back, the next request works
        llm.default = always(text("back"))
        r = await client.chat.completions.create(
            model="chela", messages=[{"role": "user", "content": "hi"}]
        )
        assert r.choices[0].message.content == "back"
        async with aiohttp.ClientSession() as s:
            auth = {"Authorization": f"Bearer {TOKEN}"}
            async with s.get(f"{base}/nowhere", headers=auth) as resp:
                assert resp.status == 404 and resp.content_type == "application/json"
                assert (await resp.json())["error"]["code"] == "not_found"
            async with s.get(f"{base}/chat/completions", headers=auth) as resp:
                assert resp.status == 405 and resp.content_type == "application/json"
            bad = {"messages": [{"role": "robot", "content": "x"}]}
            async with s.post(f"{base}/chat/completions", json=bad, headers=auth) as resp:
                assert resp.status == 400
                assert "robot" in (await resp.json())["error"]["message"]
            last_assistant = {
                "messages": [
                    {"role": "user", "content": "x"},
                    {"role": "assistant", "content": "y"},
                ]
            }
            async with s.post(
                f"{base}/chat/completions", json=last_assistant, headers=auth
            ) as resp:
                assert resp.status == 400


async def test_503_while_shutting_down():
    from channels.http import HttpChannel

    ch = HttpChannel(host="127.0.0.1", port=0, token=TOKEN)
    arrived = []

    async def sink(msg):  # stored, never answered: the daemon is stopping
        arrived.append(msg)

    await ch.start(sink)
    url = f"http://127.0.0.1:{ch.bound_port}/v1/chat/completions"
    body = {"messages": [{"role": "user", "content": "hi"}]}
    async with aiohttp.ClientSession() as s:
        import asyncio

        req = asyncio.ensure_future(
            s.post(url, json=body, headers={"Authorization": f"Bearer {TOKEN}"})
        )
        while not arrived:
            await asyncio.sleep(0.01)
        assert arrived[0].api["stateless"] is True
        await ch.stop()
        resp = await req
        assert resp.status == 503
        assert (await resp.json())["error"]["code"] == "shutting_down"


async def test_litellm_as_a_client(tmp_path, llm, monkeypatch):
    import litellm

    async with api(tmp_path, llm, monkeypatch) as (_d, client):
        llm.script(text("hi from litellm's side", usage=usage(9, 4)))
        r = await litellm.acompletion(
            model="openai/chela",
            api_base=str(client.base_url),
            api_key=TOKEN,
            messages=[
                {"role": "system", "content": "Speak softly."},
                {"role": "user", "content": "hello"},
            ],
            max_tokens=20,
            num_retries=0,
        )
        assert r.choices[0].message.content == "hi from litellm's side"
        assert (r.usage.prompt_tokens, r.usage.completion_tokens) == (9, 4)
    assert llm.requests[0]["max_tokens"] == 20
    assert "## Client Instructions\nSpeak softly." in llm.requests[0]["messages"][0]["content"]


async def test_an_api_call_of_the_last_run_is_not_answered_after_restart(
    tmp_path, llm, monkeypatch
):
    """Its caller got a 503 and has gone: answering it would only spend a model call."""
    import time

    from bot.store import Store
    from channels.base import InboundMessage

    monkeypatch.setenv("TEST_HTTP_TOKEN", TOKEN)
    http = {"enabled": True, "listen": "127.0.0.1:0", "token_env": "TEST_HTTP_TOKEN"}
    cfg = make_config(tmp_path, llm, channels={"http": http})
    api_data = {"messages": [{"role": "user", "content": "old", "images": []}], "stateless": True}
    cfg.db_path.parent.mkdir(parents=True, exist_ok=True)
    s = Store(cfg.db_path)
    for channel, chat, api_part in (("http", "req-old", api_data), ("terminal", "local", {})):
        msg = InboundMessage(
            channel=channel,
            chat_id=chat,
            sender_id="",
            text="left over",
            message_id=chat,
            timestamp=time.time() - 60,
            api=api_part,
        )
        s.add_inbound(channel, "default", chat, chat, f"agent:main:{chat}", msg.to_json())
    s.close()
    llm.script(text("answered"))
    async with running(cfg) as d:
        await llm.wait_for_requests(1)  # the twin: the terminal's message is answered
        status = {r.payload["channel"]: r.status for r in d.store.inbound_with_status("skipped")}
        assert status == {"http": "skipped"}
    assert len(llm.requests) == 1 and "left over" in llm.requests[0]["messages"][-1]["content"]


def _u(text: str) -> dict:
    return {"role": "user", "content": text, "images": []}


def test_plan_refusals_and_their_twins():
    from bot.conversation.api import plan

    tool = {"type": "function", "function": {"name": "get_weather", "parameters": {}}}
    ok = plan(
        {"messages": [_u("x")], "tools": [tool]},
        None,
        epoch=0,
        own_tools={"read"},
        native_tools=True,
    )
    assert ok.error == "" and ok.tools == [tool] and ok.user_turn and ok.prior == []
    clash = plan(
        {"messages": [_u("x")], "tools": [tool]},
        None,
        epoch=0,
        own_tools={"get_weather"},
        native_tools=True,
    )
    assert "own tools" in clash.error
    text_mode = plan(
        {"messages": [_u("x")], "tools": [tool]}, None, epoch=0, own_tools=set(), native_tools=False
    )
    assert "native_tools" in text_mode.error
    assert (
        plan({"messages": [_u("x")]}, None, epoch=0, own_tools=set(), native_tools=False).error
        == ""
    )


def test_plan_record_follows_the_epoch():
    """A record from before /new (another epoch) is not used: the client's history is new."""
    from bot.conversation.api import plan

    msgs = [_u("q1"), {"role": "assistant", "content": "a1"}, _u("q2")]
    record = {"epoch": 0, "seen": [digest(m) for m in msgs[:2]], "pending": []}
    same = plan({"messages": msgs}, record, epoch=0, own_tools=set(), native_tools=True)
    assert same.prior == [] and not same.fork
    after_reset = plan({"messages": msgs}, record, epoch=1, own_tools=set(), native_tools=True)
    assert [m["content"] for m in after_reset.prior] == ["q1", "a1"]


# ------------------------------------------------------------------------- housekeeping
async def test_stateless_sessions_are_pruned_a_day_later_user_sessions_stay(
    tmp_path, llm, monkeypatch
):
    async with api(tmp_path, llm, monkeypatch) as (d, client):
        llm.script(text("one"), text("two"))
        await client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "stateless"}]
        )
        await client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "kept"}], user="alice"
        )
        keys = [k for (k,) in d.store.db.execute("SELECT key FROM sessions")]
        stateless = [k for k in keys if ":http-stateless:" in k]
        assert len(stateless) == 1 and "agent:main:http:alice" in keys

        # an hour later nothing goes: a stateless session is kept for a day
        await d.cron.prune_media()
        assert stateless[0] in [k for (k,) in d.store.db.execute("SELECT key FROM sessions")]

        d.store.db.execute("UPDATE sessions SET updated = updated - 2 * 86400")
        await d.cron.prune_media()
        left = [k for (k,) in d.store.db.execute("SELECT key FROM sessions")]
        assert stateless[0] not in left and "agent:main:http:alice" in left
        msgs = dict(d.store.db.execute("SELECT session_key, count(*) FROM messages GROUP BY 1"))
        assert stateless[0] not in msgs and msgs["agent:main:http:alice"] >= 2
        # usage is history: it stays for `chela usage`
        assert any(stateless[0] == r["session_key"] for r in d.store.usage_rows(0))
