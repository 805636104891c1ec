"""Which failed model calls make an outage (``LLMError.kind == "down"``, SPEC §24): no
connection, a timeout, a 5xx or a 429 after the retries; a refusal (400, 401, 403, 404) is
not one, and the user gets today's error for it.  Through the client against the fake LLM
on both model paths."""

from __future__ import annotations

import pytest

from bot.model import LLMClient, LLMError, ModelTarget
from tests.fakes.llm import FakeLLM, always, delay, drop, error, text
from tests.model_paths import model_path  # noqa: F401 - the fixture, used below

pytestmark = pytest.mark.usefixtures("model_path")

MSGS = [{"role": "user", "content": "hi"}]


async def no_wait(_seconds: float) -> None:
    return None


def client(fake: FakeLLM, *fallbacks: FakeLLM, timeout: float = 5.0) -> LLMClient:
    return LLMClient(
        "openai/fake-model",
        api_base=fake.base_url,
        api_key="sk-test",
        timeout=timeout,
        max_retries=1,
        sleep=no_wait,
        fallbacks=[
            ModelTarget("openai/other-model", f.base_url, "sk-other", f"agent.fallbacks[{i}]")
            for i, f in enumerate(fallbacks)
        ],
    )


async def kind_of(c: LLMClient) -> str:
    with pytest.raises(LLMError) as ei:
        await c.complete(MSGS)
    return ei.value.kind


@pytest.mark.parametrize("status", [500, 502, 503, 429])
async def test_a_server_error_or_rate_limit_is_an_outage(llm, status):
    llm.default = always(error(status))
    assert await kind_of(client(llm)) == "down"


async def test_a_broken_connection_and_a_timeout_are_an_outage(llm):
    llm.default = always(drop())
    assert await kind_of(client(llm)) == "down"
    llm.default = always(delay(2, text("late")))
    assert await kind_of(client(llm, timeout=0.3)) == "down"


@pytest.mark.parametrize("status", [400, 401, 403, 404])
async def test_a_refusal_is_not_an_outage(llm, status):
    llm.default = always(error(status))
    assert await kind_of(client(llm)) != "down"


async def test_a_chain_is_down_when_no_model_answers_and_none_refused_for_good(llm):
    async with FakeLLM() as other:
        llm.default = always(error(503))
        other.default = always(drop())
        assert await kind_of(client(llm, other)) == "down"
        other.default = always(error(401))  # a bad key elsewhere: the primary may come back
        assert await kind_of(client(llm, other)) == "down"
        llm.default = always(error(401))  # every model refused: configuration, not an outage
        assert await kind_of(client(llm, other)) == "config"
        other.default = always(text("here"))  # the twin: one answers
        assert (await client(llm, other).complete(MSGS)).text == "here"
