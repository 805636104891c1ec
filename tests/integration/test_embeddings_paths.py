"""Embeddings on both model paths (Chela's own ``POST /embeddings`` and litellm's
``aembedding``) against the fake /v1/embeddings: the vectors in the order of the texts, the
usage, the key sent only there, and a down endpoint raised as an outage."""

from __future__ import annotations

import pytest

from bot.model import LLMError, ModelTarget
from bot.model.embeddings import embed
from tests.fakes.embeddings import FakeEmbeddings, vector
from tests.model_paths import model_path  # noqa: F401 - the fixture, used below

pytestmark = pytest.mark.usefixtures("model_path")


async def test_vectors_in_order_with_usage():
    async with FakeEmbeddings() as fake:
        target = ModelTarget("openai/fake-embed", fake.base_url, "sk-embed-key")
        texts = ["Anna's birthday party", "car service at the garage", "pizza"]
        got = await embed(target, texts)
        assert fake.inputs == texts
        assert got.vectors == [pytest.approx(vector(t)) for t in texts]
        assert got.usage["prompt_tokens"] > 0 and got.model == "openai/fake-embed"
        assert fake.requests[0]["model"] == "fake-embed"  # the provider's name, no prefix
        assert fake.headers[0]["Authorization"] == "Bearer sk-embed-key"


async def test_a_down_endpoint_is_an_outage():
    async with FakeEmbeddings() as fake:
        fake.go_down()
        with pytest.raises(LLMError) as e:
            await embed(ModelTarget("openai/fake-embed", fake.base_url, "k"), ["x"], timeout=5)
        assert e.value.kind == "down" and fake.inputs == []
        # twin: up again, it answers
        fake.come_up()
        assert (await embed(ModelTarget("openai/fake-embed", fake.base_url, "k"), ["x"])).vectors
