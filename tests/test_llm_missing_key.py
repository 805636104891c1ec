"""A model with no key configured gets a message that says so, not a vague outage."""

import pytest

from bot.agent.llm import LLMClient, LLMError


async def test_missing_api_key_is_named(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    client = LLMClient("openai/gpt-4o-mini", max_retries=0)
    with pytest.raises(LLMError) as e:
        await client.complete([{"role": "user", "content": "hi"}])
    assert "No API key is configured" in e.value.user_message
    assert "agent.api_key_env" in e.value.user_message
