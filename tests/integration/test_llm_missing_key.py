"""A model with no key configured gets a message that says so, not a vague outage."""

import pytest

from bot.model import LLMClient, LLMError
from tests.model_paths import model_path  # noqa: F401 - the fixture, used below

# every test here runs on both model paths (one contract, two paths)
pytestmark = pytest.mark.usefixtures("model_path")


async def test_missing_api_key_is_named(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    client = LLMClient("openai/gpt-4o-mini", max_retries=0)
    with pytest.raises(LLMError) as e:
        await client.complete([{"role": "user", "content": "hi"}])
    assert "No API key is configured" in e.value.user_message
    assert "agent.api_key_env" in e.value.user_message


async def test_missing_key_makes_no_request(monkeypatch, llm):
    """Checked before calling: nothing goes out (no request to the provider, none anywhere)."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    client = LLMClient("openai/gpt-4o-mini", max_retries=2)
    for _ in range(2):
        with pytest.raises(LLMError) as e:
            await client.complete([{"role": "user", "content": "hi"}])
        assert not e.value.retryable and "No API key" in e.value.user_message
    assert llm.requests == []


async def test_key_from_the_environment_is_enough(monkeypatch, llm):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    monkeypatch.setenv("OPENAI_BASE_URL", llm.base_url)  # the provider default, pointed at the fake
    monkeypatch.setenv("OPENAI_API_BASE", llm.base_url)
    c = await LLMClient("openai/gpt-4o-mini", max_retries=0).complete(
        [{"role": "user", "content": "hi"}]
    )
    assert c.text and len(llm.requests) == 1
    assert llm.headers[0].get("Authorization") == "Bearer sk-from-env"
