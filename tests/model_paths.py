"""One contract, two paths (SPEC §12): the ``model_path`` fixture runs a model-layer test
once on Chela's own OpenAI-compatible client and once through litellm, for the same
``openai/…`` model against the same fake server."""

from __future__ import annotations

import pytest

from bot.model.openai_compat import PATH_ENV

PATHS = ("openai_compat", "litellm")


@pytest.fixture(params=PATHS)
def model_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "litellm":
        monkeypatch.setenv(PATH_ENV, "litellm")
    else:
        monkeypatch.delenv(PATH_ENV, raising=False)
    return str(request.param)
