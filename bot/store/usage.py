"""Usage rows: one per model call, for /usage, `chela usage` and the cost limits."""

from __future__ import annotations

import time
from typing import Any

from bot.store.db import Database

_USAGE_TOTALS = (
    "SELECT COUNT(*), COALESCE(SUM(prompt_tokens),0), COALESCE(SUM(completion_tokens),0),"
    " COALESCE(SUM(cached_tokens),0), COALESCE(SUM(cost_usd),0) FROM usage WHERE created>=?"
)


class UsageMixin(Database):
    def add_usage(
        self,
        session_key: str,
        turn: str,
        model: str,
        *,
        prompt_tokens: int = 0,
        completion_tokens: int = 0,
        cached_tokens: int = 0,
        cost_usd: float = 0.0,
        kind: str = "chat",
        trust: str = "owner",
        created: float | None = None,
        agent: str = "",
    ) -> None:
        """Record one model call (``agent``: the agent it was made for)."""
        self.db.execute(
            "INSERT INTO usage(session_key, turn, kind, trust, model, prompt_tokens,"
            " completion_tokens, cached_tokens, cost_usd, created, agent)"
            " VALUES (?,?,?,?,?,?,?,?,?,?,?)",
            (
                session_key,
                turn,
                kind,
                trust,
                model,
                int(prompt_tokens),
                int(completion_tokens),
                int(cached_tokens),
                float(cost_usd),
                time.time() if created is None else created,
                agent,
            ),
        )

    def usage_totals(
        self,
        since: float,
        *,
        session_key: str | None = None,
        trust: str | None = None,
        agent: str | None = None,
    ) -> dict[str, Any]:
        """Calls, tokens and cost since ``since`` (epoch seconds), optionally of one
        session, one trust level or one agent."""
        q = _USAGE_TOTALS
        args: list[Any] = [since]
        if agent is not None:
            q += " AND agent=?"
            args.append(agent)
        if session_key is not None:
            q += " AND session_key=?"
            args.append(session_key)
        if trust is not None:
            q += " AND trust=?"
            args.append(trust)
        r = self.db.execute(q, args).fetchone()
        return {
            "calls": r[0],
            "prompt_tokens": r[1],
            "completion_tokens": r[2],
            "cached_tokens": r[3],
            "cost_usd": r[4],
        }

    def usage_rows(self, since: float) -> list[dict[str, Any]]:
        """Every model call since ``since``, oldest first."""
        cols = (
            "session_key",
            "turn",
            "kind",
            "trust",
            "model",
            "prompt_tokens",
            "completion_tokens",
            "cached_tokens",
            "cost_usd",
            "created",
            "agent",
        )
        rows = self.db.execute(
            f"SELECT {', '.join(cols)} FROM usage WHERE created>=? ORDER BY id", (since,)
        )
        return [dict(zip(cols, r, strict=True)) for r in rows]
