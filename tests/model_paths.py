"""One contract, two paths: the ``model_path`` fixture runs a model-layer test
once per row of the model-path registry (Chela's own OpenAI-compatible client, litellm), for
the same ``openai/…`` model against the same fake server."""

from __future__ import annotations

import pytest

from bot.model.paths import PATH_ENV, PATHS


@pytest.fixture(params=[p.name for p in PATHS])
def model_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv(PATH_ENV, request.param)  # only that registry row serves
    return str(request.param)
