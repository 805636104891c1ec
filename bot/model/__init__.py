"""The model layer (ARCHITECTURE.md): for now the gate every model call passes (SPEC §9.5)."""

from bot.model.gate import BudgetRefused, GateCall, ModelGate, budget_refusal, day_start

__all__ = ["BudgetRefused", "GateCall", "ModelGate", "budget_refusal", "day_start"]
