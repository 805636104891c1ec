"""The model layer (docs/architecture.md, L3): one client over the model paths, and the
gate every model call passes.

- ``routing``: ``ModelTarget``, ``Route``, the ``ModelPath`` interface, the cost of a call
- ``paths``: the registry of model paths (first that serves a model wins; litellm last);
  ``path_for``, ``litellm_needed``
- ``openai_compat``: the light path, Chela's own Chat Completions client (no litellm)
- ``litellm_path``: the litellm path and the one place litellm is imported (``start``,
  ``warm_up``, ``loaded``)
- ``prices``: prices and context windows from litellm's price table, read as data
- ``errors``: ``LLMError`` and the classification of whatever litellm raised
- ``response``: ``Completion``, ``ToolCall``, usage numbers
- ``stream``: a streamed answer collected into a ``Completion``
- ``client``: ``LLMClient`` (retries, failover, cooldown)
- ``gate``: budget and usage for every call
"""

from bot.model.client import ON_CALL, LLMClient
from bot.model.errors import LLMError, unroutable_message
from bot.model.gate import BudgetRefused, GateCall, ModelGate, budget_refusal, day_start
from bot.model.litellm_path import routing_error, warm_up
from bot.model.paths import litellm_needed, needs_litellm, path_for
from bot.model.prices import context_window
from bot.model.response import Completion, ToolCall, usage_numbers
from bot.model.routing import ModelPath, ModelTarget, cost_of

__all__ = [
    "ON_CALL",
    "BudgetRefused",
    "Completion",
    "GateCall",
    "LLMClient",
    "LLMError",
    "ModelGate",
    "ModelPath",
    "ModelTarget",
    "ToolCall",
    "budget_refusal",
    "context_window",
    "cost_of",
    "day_start",
    "litellm_needed",
    "needs_litellm",
    "path_for",
    "routing_error",
    "unroutable_message",
    "usage_numbers",
    "warm_up",
]
