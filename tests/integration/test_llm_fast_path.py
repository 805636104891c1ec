"""The model call's fast path (issue 19): providers whose litellm chat path is async are
called on the event loop (no worker thread, no per-call success machinery); the answers,
usage and typed errors are the same as through ``litellm.acompletion``."""

from __future__ import annotations

import inspect
import threading

import pytest

from bot.model import LLMClient, LLMError, errors, lite, routing
from bot.model.openai_compat import PATH_ENV
from bot.model.routing import INLINE_PROVIDERS
from tests.fakes.llm import error, text, tool_calls, usage

MSGS = [{"role": "user", "content": "hi"}]


@pytest.fixture(autouse=True)
def _litellm_path(monkeypatch):
    """This file is about litellm's path: openai/ models take it too here."""
    monkeypatch.setenv(PATH_ENV, "litellm")


@pytest.mark.parametrize("provider", sorted(INLINE_PROVIDERS))
def test_every_inline_provider_returns_a_coroutine_without_network(provider):
    """The sync part of these providers' calls only builds the request: it hands back a
    coroutine (nothing is sent until it is awaited; here it never is)."""
    lit = lite._load_litellm()
    parts = routing._fast_parts(lit)
    assert parts is not None, "this litellm lacks what the fast path uses"
    kw = {
        "model": f"{provider}/some-model",
        "messages": MSGS,
        "api_base": "http://127.0.0.1:9/v1",
        "api_key": "sk-test",
        "timeout": 5,
        "num_retries": 0,
        "max_retries": 0,
    }
    pending = routing._begin(lit, parts, kw)
    assert inspect.isawaitable(pending), f"{provider}: answered synchronously"
    pending.close()
    route = routing._resolve(lit, kw["model"], kw["api_base"])
    assert route.provider == provider and route.inline


async def test_inline_and_acompletion_paths_agree(llm, monkeypatch):
    seen_threads: list[str] = []
    real_send = LLMClient._send

    async def spy(self, lit, route, kw):
        seen_threads.append(threading.current_thread().name)
        return await real_send(self, lit, route, kw)

    monkeypatch.setattr(LLMClient, "_send", spy)
    results = []
    for inline in (True, False):
        routing._routes.clear()
        monkeypatch.setenv("CHELA_LLM_INLINE", "1" if inline else "0")
        c = LLMClient("openai/gpt-4o-mini", api_base=llm.base_url, api_key="sk-x", max_retries=0)
        llm.script(
            tool_calls([("read", {"path": "a"})], usage=usage(100, 5, cached=40)),
            error(429, retry_after=7),
        )
        comp = await c.complete(MSGS, [{"type": "function", "function": {"name": "read"}}])
        assert routing._routes[("openai/gpt-4o-mini", llm.base_url)].inline is inline
        with pytest.raises(LLMError) as ei:
            await c.complete(MSGS)
        results.append(
            (
                comp.tool_calls[0].name,
                comp.usage,
                round(comp.cost, 12),
                ei.value.status,
                type(ei.value.cause).__name__,
                errors._retry_after(ei.value.cause),
            )
        )
    routing._routes.clear()
    assert results[0] == results[1]
    assert results[0][1] == {
        "prompt_tokens": 100,
        "completion_tokens": 5,
        "total_tokens": 105,
        "cached_tokens": 40,
    }
    assert results[0][2] > 0
    assert results[0][3:] == (429, "RateLimitError", 7.0)
    assert llm.requests[0] == llm.requests[2]  # the same request on the wire either way
    assert set(seen_threads) == {"MainThread"}


async def test_cost_is_zero_for_a_model_outside_the_cost_map(llm):
    llm.script(text("x", usage=usage(1000, 1000)))
    comp = await LLMClient("openai/no-such-model", api_base=llm.base_url).complete(MSGS)
    assert comp.usage["prompt_tokens"] == 1000 and comp.cost == 0.0
