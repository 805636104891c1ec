"""One contract, two paths: the same model call sends the same JSON
whichever path serves it; the light path never imports litellm; which path a model takes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bot.model import LLMClient, prices
from bot.model.paths import PATH_ENV
from tests.fakes.llm import FakeLLM, error, text, tool_calls

MSGS = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "héllo"}]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read",
            "description": "read a file",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        },
    }
]
PARAMS = {
    "max_tokens": 5,
    "temperature": 0.2,
    "top_p": 0.5,
    "stop": ["x"],
    "seed": 1,
    "tool_choice": "auto",
    "reasoning_effort": "low",
    "response_format": {"type": "json_object"},
}


async def _calls(monkeypatch: pytest.MonkeyPatch, path: str, model: str) -> list[dict]:
    if path == "litellm":
        monkeypatch.setenv(PATH_ENV, "litellm")
    else:
        monkeypatch.delenv(PATH_ENV, raising=False)
    async with FakeLLM() as fake:
        fake.script(text("a"), tool_calls([("read", {"path": "a"})]), text("b"), text("c"))
        c = LLMClient(model, api_base=fake.base_url, api_key="sk-test")
        await c.complete(MSGS)
        await c.complete(MSGS, TOOLS, params=PARAMS)
        await c.complete(MSGS, TOOLS, on_delta=lambda _d: None)
        await c.complete(MSGS, params={"max_completion_tokens": 9})
        assert all(h["Authorization"] == "Bearer sk-test" for h in fake.headers)
        return list(fake.requests)


# a model litellm knows without reasoning (reasoning_effort dropped), ones it does not know
@pytest.mark.parametrize("model", ["openai/gpt-4o-mini", "openai/local-llm", "hosted_vllm/qwen3"])
async def test_same_request_json_on_both_paths(monkeypatch, model):
    light = await _calls(monkeypatch, "openai_compat", model)
    heavy = await _calls(monkeypatch, "litellm", model)
    assert light == heavy
    assert light[0]["model"] == model.split("/", 1)[1]
    assert light[1]["tools"] == TOOLS
    assert ("reasoning_effort" in light[1]) is (model != "openai/gpt-4o-mini")
    assert light[2]["stream"] is True and light[2]["stream_options"] == {"include_usage": True}


async def test_usage_and_cost_from_the_price_table(monkeypatch):
    monkeypatch.delenv(PATH_ENV, raising=False)
    info = prices.model_info("gpt-4o", "openai")
    assert info is not None and info.prices and info.window > 0
    async with FakeLLM() as fake:
        fake.script(text("hi", usage={"prompt_tokens": 1000, "completion_tokens": 10}))
        comp = await LLMClient("openai/gpt-4o", api_base=fake.base_url).complete(MSGS)
    inp, out, _read, _write = info.prices
    assert comp.cost == pytest.approx(1000 * inp + 10 * out)
    assert comp.usage["prompt_tokens"] == 1000


async def test_context_overflow_is_named_on_the_light_path(monkeypatch):
    monkeypatch.delenv(PATH_ENV, raising=False)
    from bot.agent.loop import is_context_overflow
    from bot.model import LLMError

    body = {
        "error": {
            "message": "This model's maximum context length is 8192 tokens.",
            "type": "invalid_request_error",
            "code": "context_length_exceeded",
        }
    }
    async with FakeLLM() as fake:
        fake.script(error(400, body=body))
        with pytest.raises(LLMError) as ei:
            await LLMClient("openai/m", api_base=fake.base_url).complete(MSGS)
    assert "too long" in ei.value.user_message
    assert is_context_overflow(ei.value)
    assert len(fake.requests) == 1  # not retried


def test_a_config_needs_litellm_only_for_a_model_on_its_path(tmp_path):
    from bot.model import litellm_needed
    from tests.e2e import make_config

    class _Llm:
        base_url = "http://127.0.0.1:9/v1"

    cfg = make_config(tmp_path, _Llm())
    assert cfg.agent.model.startswith("openai/") and not litellm_needed(cfg)
    from bot.config.agent import FallbackModel

    cfg.agent.models["claude"] = FallbackModel(model="anthropic/claude-sonnet-4")
    assert litellm_needed(cfg)
    cfg.agent.models.clear()
    cfg.media.transcription_model = "openai/whisper-1"
    assert litellm_needed(cfg)


def test_vision_and_window_from_the_table():
    assert prices.supports_vision("openai/gpt-4o") is True
    assert prices.supports_vision("openai/no-such-model") is None
    assert prices.context_window("openai/gpt-4o") == 128000


def test_light_path_never_imports_litellm():
    code = """
import asyncio, sys
from tests.fakes.llm import FakeLLM, streamed, text
from bot.model import LLMClient

async def main():
    async with FakeLLM() as fake:
        fake.script(text("one"), streamed("two"))
        c = LLMClient("openai/gpt-4o", api_base=fake.base_url)
        assert (await c.complete([{"role": "user", "content": "hi"}])).cost > 0
        got = await c.complete([{"role": "user", "content": "hi"}], on_delta=lambda d: None)
        assert got.text == "two", got.text
asyncio.run(main())
assert "litellm" not in sys.modules, "litellm was imported"
"""
    subprocess.run(
        [sys.executable, "-c", code],
        check=True,
        cwd=str(Path(__file__).resolve().parents[2]),
        timeout=120,
    )


async def test_a_new_path_is_one_class_and_one_registry_row(monkeypatch):
    """A test-only path, registered above the others, serves its models; the rest of the
    registry is asked as before."""
    from bot.model import paths
    from bot.model.routing import ModelTarget, Route

    class EchoPath:
        name = "echo"
        label = "echo (test only)"

        def serves(self, model: str, api_base: str) -> bool:
            return model.startswith("echo/")

        async def ready(self) -> None:
            return None

        def route(self, target: ModelTarget) -> Route:
            return Route("echo", target.model.partition("/")[2])

        def missing_key(self, target: ModelTarget) -> bool:
            return False

        def takes_effort(self, target: ModelTarget) -> bool:
            return False

        async def send(self, kw: dict, route: Route, timeout: float) -> dict:
            said = kw["messages"][-1]["content"]
            message = {"role": "assistant", "content": f"{route.model}: {said}"}
            return {"choices": [{"message": message, "finish_reason": "stop"}]}

    monkeypatch.delenv(PATH_ENV, raising=False)
    monkeypatch.setattr(paths, "PATHS", (EchoPath(), *paths.PATHS))
    comp = await LLMClient("echo/parrot").complete(MSGS)
    assert comp.text == "parrot: héllo"
    assert paths.path_for("openai/gpt-4o").name == "openai_compat"
    assert paths.path_for("anthropic/claude-sonnet-4").name == "litellm"
