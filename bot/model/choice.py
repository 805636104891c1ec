"""A session's choices for its model calls: the model it switched to
with ``/model`` and its thinking level (``/think``, sent as ``reasoning_effort``).

The conversation's run stage sets :data:`CHOICE` around a turn; the turn's task inherits
it, so every call of the turn (the loop's, a compaction summary through the main client)
follows it.  It names the client it applies to: another client (a compaction model of its
own) keeps its chain and sends no effort."""

from __future__ import annotations

import contextvars
import logging
from dataclasses import dataclass
from typing import Any

from bot.model.routing import ModelPath, ModelTarget

log = logging.getLogger("bot.model.client")


@dataclass(frozen=True)
class Choice:
    client: object  # the LLMClient it applies to
    model: str = ""  # "" = the client's own chain (agent.model first)
    reasoning_effort: str = ""  # "" = nothing sent


CHOICE: contextvars.ContextVar[Choice | None] = contextvars.ContextVar(
    "chela_model_choice", default=None
)

_told: set[str] = set()  # models already logged as not taking reasoning_effort


def _mine(client: object) -> Choice | None:
    choice = CHOICE.get()
    return choice if choice is not None and choice.client is client else None


def chain(client: Any) -> list[int] | None:
    """The indices of ``client.targets`` to try for this call: the session's model first,
    then ``agent.fallbacks``; None for the client's own chain.  A model that
    is not in the chain yet (an ``agent.models`` alias) is added to it once, with the
    primary model's ``api_base`` and key."""
    choice = _mine(client)
    targets: list[ModelTarget] = client.targets
    if choice is None or not choice.model or choice.model == targets[0].model:
        return None
    found = [i for i, t in enumerate(targets) if t.model == choice.model]
    if found:
        first = found[0]
    else:
        first = client.add_target(
            ModelTarget(choice.model, targets[0].api_base, targets[0].api_key, "agent.models")
        )
    return [first, *(i for i in range(1, client.fallback_count + 1) if i != first)]


def apply_effort(client: object, t: ModelTarget, kw: dict[str, Any], path: ModelPath) -> None:
    """Add the session's ``reasoning_effort`` to one call of model ``t`` when its path says
    the model takes it; a model that does not gets the call without it, and one log line."""
    choice = _mine(client)
    if choice is None or not choice.reasoning_effort or "reasoning_effort" in kw:
        return
    if path.takes_effort(t):
        kw["reasoning_effort"] = choice.reasoning_effort
    elif t.model not in _told:
        _told.add(t.model)
        log.info("model %s does not take reasoning_effort: thinking level not sent", t.model)
