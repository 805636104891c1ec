"""LLMClient against the fake OpenAI-compatible server, on both model paths: Chela's own client
and the REAL litellm (loopback only)."""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from pathlib import Path

import pytest

from bot.model import LLMClient, LLMError
from tests.fakes.llm import (
    FakeLLM,
    delay,
    drop,
    error,
    raw_tool_calls,
    text,
    tool_calls,
    usage,
)
from tests.fakes.llm import fake_llm  # noqa: F401 - a pytest fixture used below
from tests.model_paths import model_path  # noqa: F401 - the fixture, used below

# every test here runs on both model paths (one contract, two paths)
pytestmark = pytest.mark.usefixtures("model_path")

MSGS = [{"role": "user", "content": "hi"}]


@pytest.fixture
async def fake():
    async with FakeLLM() as f:
        yield f


def client(fake: FakeLLM, **kw) -> LLMClient:
    kw.setdefault("backoff_base", 0.001)
    return LLMClient("openai/fake-model", api_base=fake.base_url, **kw)


def test_import_is_lazy():
    import subprocess

    code = (
        "import sys, bot.model, bot.agent.loop, bot.agent.tools, bot.rules.textproto, channels.redact\n"
        "assert 'litellm' not in sys.modules, 'litellm imported eagerly'\n"
    )
    subprocess.run(
        [sys.executable, "-c", code],
        check=True,
        cwd=str(Path(__file__).resolve().parents[2]),
        timeout=60,
    )


async def test_text_reply(fake):
    fake.script(text("hello there", usage={"prompt_tokens": 7, "completion_tokens": 3}))
    c = await client(fake).complete(MSGS)
    assert c.text == "hello there"
    assert c.tool_calls == []
    assert c.usage == {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}
    assert c.raw_finish_reason == "stop"
    req = fake.requests[0]
    assert req["messages"] == MSGS
    assert "tools" not in req
    assert fake.headers[0]["Authorization"] == "Bearer sk-local"


async def test_default_responder_and_api_key(fake):
    c = await client(fake, api_key="sk-configured-key").complete(MSGS)
    assert c.text == "ok"
    assert fake.headers[0]["Authorization"] == "Bearer sk-configured-key"
    fake.default = lambda req: text("echo: " + req["messages"][-1]["content"])
    c = await client(fake).complete([{"role": "user", "content": "ping"}])
    assert c.text == "echo: ping"


async def test_tool_calls_and_tools_param(fake):
    tools = [
        {
            "type": "function",
            "function": {
                "name": "read",
                "description": "r",
                "parameters": {"type": "object", "properties": {}},
            },
        }
    ]
    fake.script(tool_calls([("read", {"path": "a.txt"}), ("exec", {"command": "ls"})]))
    c = await client(fake).complete(MSGS, tools)
    assert [(t.name, t.arguments) for t in c.tool_calls] == [
        ("read", '{"path": "a.txt"}'),
        ("exec", '{"command": "ls"}'),
    ]
    assert len({t.id for t in c.tool_calls}) == 2
    assert fake.requests[0]["tools"] == tools


async def test_raw_tool_call_arguments_pass_through(fake):
    fake.script(raw_tool_calls([("read", '{"path": ')]))
    c = await client(fake).complete(MSGS)
    assert c.tool_calls[0].arguments == '{"path": '


async def test_429_then_success_honours_retry_after(fake, caplog):
    fake.script(error(429, retry_after=0.05), text("after"))
    t0 = time.monotonic()
    c = await client(fake, backoff_base=0.0001).complete(MSGS)
    assert c.text == "after"
    assert len(fake.requests) == 2
    assert time.monotonic() - t0 >= 0.05


async def test_500_forever_gives_clear_error(fake):
    fake.default = lambda req: error(500)
    with pytest.raises(LLMError) as ei:
        await client(fake, max_retries=2).complete(MSGS)
    assert len(fake.requests) == 3
    msg = ei.value.user_message
    assert "HTTP 500" in msg and "try again" in msg
    assert len(msg) < 120


async def test_401_not_retried_and_key_not_logged(fake, caplog):
    caplog.set_level(logging.DEBUG)
    fake.script(error(401))
    with pytest.raises(LLMError) as ei:
        await client(fake, api_key="sk-supersecretvalue").complete(MSGS)
    assert len(fake.requests) == 1
    assert "API key" in ei.value.user_message
    assert "sk-supersecretvalue" not in caplog.text
    assert "sk-supersecretvalue" not in repr(client(fake, api_key="sk-supersecretvalue"))


@pytest.mark.parametrize("status,needle", [(400, "HTTP 400"), (404, "not found")])
async def test_other_4xx_not_retried(fake, status, needle):
    fake.script(error(status))
    with pytest.raises(LLMError) as ei:
        await client(fake).complete(MSGS)
    assert len(fake.requests) == 1
    assert needle in ei.value.user_message


async def test_timeout_is_retried(fake):
    fake.script(delay(1.0, then=text("late")), text("fast"))
    c = await client(fake, timeout=0.3).complete(MSGS)
    assert c.text == "fast"
    assert len(fake.requests) == 2


async def test_connection_drop_is_retried(fake):
    fake.script(drop(), text("back"))
    c = await client(fake).complete(MSGS)
    assert c.text == "back"


async def test_unreachable_server():
    # a port nobody listens on: connection refused, retried, then a clear message
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    c = LLMClient(
        "openai/x", api_base=f"http://127.0.0.1:{port}/v1", max_retries=1, backoff_base=0.001
    )
    with pytest.raises(LLMError) as ei:
        await c.complete(MSGS)
    assert "not reachable" in ei.value.user_message
    assert "connection failed" in ei.value.user_message  # not "HTTP 500": nothing answered
    assert ei.value.retryable


async def test_real_500_is_named_as_such(fake):
    fake.script(error(500), error(500))
    with pytest.raises(LLMError) as ei:
        await client(fake, max_retries=1).complete(MSGS)
    assert "HTTP 500" in ei.value.user_message


async def test_openai_sdk_client_is_not_on_the_path(fake):
    """The default: litellm's own HTTP handler, not the openai SDK (which re-validates every
    body and costs ~2.5x the CPU per call, bench/turn_bench.py).  The SDK marks its requests
    with X-Stainless-* headers."""
    await client(fake).complete(MSGS)
    assert not [h for h in fake.headers[0] if h.lower().startswith("x-stainless")]


async def test_fake_streaming_wire_format(fake):
    """The fake speaks SSE for stream=true (for callers that stream); check it via litellm."""
    import litellm

    fake.script(
        text("streamed text here, long enough for chunks"), tool_calls([("read", {"path": "x"})])
    )
    chunks = []
    resp = await litellm.acompletion(
        model="openai/fake",
        messages=MSGS,
        api_base=fake.base_url,
        api_key="sk-local",
        stream=True,
        max_retries=0,
    )
    async for ch in resp:
        chunks.append(ch.choices[0].delta.content or "")
    assert "".join(chunks) == "streamed text here, long enough for chunks"
    resp = await litellm.acompletion(
        model="openai/fake",
        messages=MSGS,
        api_base=fake.base_url,
        api_key="sk-local",
        stream=True,
        max_retries=0,
    )
    args, name = "", None
    async for ch in resp:
        for tc in ch.choices[0].delta.tool_calls or []:
            name = name or tc.function.name
            args += tc.function.arguments or ""
    assert name == "read" and args == '{"path": "x"}'


async def test_wait_for_requests(fake):
    task = asyncio.create_task(client(fake).complete(MSGS))
    reqs = await fake.wait_for_requests(1, timeout=10)
    assert reqs[0]["messages"] == MSGS
    await task


async def test_shared_fixture_and_callable_script(fake_llm):  # noqa: F811 - the fixture
    async def responder(req):
        return "async says " + req["messages"][-1]["content"]

    fake_llm.script(responder, lambda req: text("sync"), delay(0.01, then="delayed"))
    c = client(fake_llm)
    assert (await c.complete(MSGS)).text == "async says hi"
    assert (await c.complete(MSGS)).text == "sync"
    assert (await c.complete(MSGS)).text == "delayed"
    assert (await c.complete(MSGS)).text == "ok"  # default when the script is used up
    assert fake_llm.pending == 0 and len(fake_llm.requests) == 4


async def test_cost_is_zero_for_a_model_outside_the_cost_map(fake):
    fake.script(text("x", usage=usage(1000, 1000)))
    comp = await LLMClient("openai/no-such-model", api_base=fake.base_url).complete(MSGS)
    assert comp.usage["prompt_tokens"] == 1000 and comp.cost == 0.0


async def test_cost_from_the_price_table_for_a_known_model(fake):
    # the twin: a model in the table is priced
    fake.script(text("x", usage=usage(1000, 1000)))
    comp = await LLMClient("openai/gpt-4o-mini", api_base=fake.base_url).complete(MSGS)
    assert comp.cost > 0
