"""The registry of model paths: which :class:`~bot.model.routing.ModelPath` serves a model.

``PATHS`` is asked in order and the first row that serves the model wins; litellm, which
serves every model string it can route, is the last row.  A new path is one module with a
class that implements ``ModelPath`` plus one row here, above litellm (see CONTRIBUTING.md).

``CHELA_MODEL_PATH=<name>`` lets only that row serve (``litellm``: every model through
litellm, the way back, and how the tests run one contract over both paths).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

from bot.model.litellm_path import LITELLM
from bot.model.openai_compat import LIGHT
from bot.model.routing import ModelPath

PATH_ENV = "CHELA_MODEL_PATH"
PATHS: tuple[ModelPath, ...] = (LIGHT, LITELLM)


def path_for(model: str, api_base: str = "") -> ModelPath:
    """The path that serves ``model`` at ``api_base``."""
    only = os.environ.get(PATH_ENV, "").strip().lower()
    for path in PATHS:
        if (not only or path.name == only) and path.serves(model, api_base):
            return path
    return PATHS[-1]


def needs_litellm(models: Iterable[tuple[str, str]]) -> bool:
    """Whether any of these ``(model, api_base)`` pairs takes litellm's path (for start-up:
    import litellm only when a configured model needs it)."""
    return any(path_for(model, base) is LITELLM for model, base in models if model)


def _named(cfg: Any) -> list[tuple[str, str, str]]:
    """``(key, model, api_base)`` for every chat model a config names: ``agent.model``,
    each of ``agent.fallbacks``, the ``agent.models`` aliases, ``agent.compaction.model``."""
    a = cfg.agent
    named = [("agent.model", a.model, a.api_base)]
    named += [
        (f"agent.fallbacks[{i}]", f.model, f.api_base or "") for i, f in enumerate(a.fallbacks)
    ]
    named += [(f"agent.models.{k}", m.model, m.api_base or a.api_base) for k, m in a.models.items()]
    named.append(("agent.compaction.model", a.compaction.model, a.api_base))
    return [(key, m, base) for key, m, base in named if m]


def _voice(cfg: Any) -> list[tuple[str, str]]:
    """``(key, model)`` of transcription and speech: litellm's audio calls serve them."""
    media = getattr(cfg, "media", None)
    keys = ("transcription_model", "tts_model")
    return [(f"media.{k}", getattr(media, k)) for k in keys if getattr(media, k, "")]


def litellm_needed(cfg: Any) -> bool:
    """Whether this config needs litellm at all: a chat model on litellm's path, or voice."""
    return bool(_voice(cfg)) or needs_litellm((m, base) for _k, m, base in _named(cfg))


def model_paths(cfg: Any) -> list[tuple[str, str, ModelPath]]:
    """``(key, model, path)`` for every model a config names, for ``chela doctor``."""
    out = [(key, m, path_for(m, base)) for key, m, base in _named(cfg)]
    return out + [(key, m, LITELLM) for key, m in _voice(cfg)]
