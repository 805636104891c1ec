"""The model layer (docs/architecture.md, L3): one client over litellm and the gate every model
call passes.

- ``lite``: litellm, imported only when needed (``warm_up`` pays for it early)
- ``openai_compat``: Chela's own Chat Completions client (the light path, no litellm);
  ``path_for`` names the path a model takes, ``needs_litellm`` whether any model does
- ``prices``: prices and context windows from litellm's price table, read as data
- ``routing``: provider, prices read as data, cost; the event-loop fast path
- ``errors``: ``LLMError`` and the classification of whatever litellm raised
- ``response``: ``Completion``, ``ToolCall``, usage numbers
- ``stream``: a streamed answer collected into a ``Completion``
- ``client``: ``LLMClient`` (retries, failover, cooldown)
- ``gate``: budget and usage for every call
"""

from bot.model.client import ON_CALL, LLMClient
from bot.model.errors import LLMError, unroutable_message
from bot.model.gate import BudgetRefused, GateCall, ModelGate, budget_refusal, day_start
from bot.model.lite import warm_up
from bot.model.openai_compat import litellm_needed, needs_litellm, path_for
from bot.model.prices import context_window
from bot.model.response import Completion, ToolCall, usage_numbers
from bot.model.routing import ModelTarget, cost_of, routing_error

__all__ = [
    "ON_CALL",
    "BudgetRefused",
    "Completion",
    "GateCall",
    "LLMClient",
    "LLMError",
    "ModelGate",
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
