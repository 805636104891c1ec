"""The compaction engine: the per-turn history fit, the memory flush and the summary call
(the plan of it: ``bot.agent.compaction.plan``)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any
from collections.abc import Awaitable, Callable
from zoneinfo import ZoneInfo

from bot.model import LLMError
from bot.model.gate import BudgetRefused, ModelGate
from bot.store import Store, WindowRow

if TYPE_CHECKING:
    from bot.agent.tools import ToolContext, ToolRegistry
    from bot.agent.request import TurnRequest
    from bot.config import Config

from .plan import (
    FLUSH_MAX_STEPS,
    FLUSH_PROMPT,
    FLUSH_TIMEOUT,
    FLUSH_TOOLS,
    SUMMARY_INSTRUCTIONS,
    SUMMARY_TIMEOUT,
    Budget,
    Outcome,
    choose_cut,
    clip_to_tokens,
    fallback_summary,
    reserve_for,
    summary_message,
    transcript_lines,
)
from .counting import Counting

log = logging.getLogger("chela.compaction")


# --------------------------------------------------------------------------- engine
@dataclass
class _TurnFit:
    """Per-turn state of the loop's fit hook."""

    budget: Budget
    history_end: int  # convo[1:history_end] is stored history
    model: str  # the model the turn's calls use (its tokenizer counts what is new)
    counts: dict[int, int] = field(default_factory=dict)
    compacted: bool = False
    shrinks: int = 0


class Compactor(Counting):
    def __init__(
        self, cfg: Config, store: Store, *, llm_factory: Callable[..., Any], main_llm: Any
    ):
        super().__init__(cfg, store, main_llm)
        self.gate = ModelGate(cfg, store)  # every call's budget and usage
        self.summary_model = self.c.model or cfg.agent.model
        self._llm_factory = llm_factory  # builds an LLMClient (model, timeout, retries, extra)

    def view_tokens(self, summary: dict | None, rows: list[WindowRow]) -> int:
        return (summary["tokens"] + 30 if summary else 0) + sum(r.tokens for r in rows)

    @staticmethod
    def view_messages(summary: dict | None, rows: list[WindowRow]) -> list[dict]:
        """The messages of a request: the summary's, then a copy of each row's (one level:
        whoever edits a message it sends cannot change the view the next turn reads)."""
        return ([summary_message(summary["text"])] if summary else []) + [
            dict(r.message) for r in rows
        ]

    @staticmethod
    def known_counts(
        counts: dict[int, int], summary: dict | None, rows: list[WindowRow], msgs: list[dict]
    ) -> None:
        """Record the counts of ``view_messages(summary, rows)`` (``msgs``) by message id:
        the stored ones, not counted again."""
        if summary:
            counts[id(msgs[0])] = summary["tokens"] + 30
        counts.update(
            zip(map(id, msgs[1 if summary else 0 :]), [r.tokens for r in rows], strict=True)
        )

    async def history_for_turn(
        self,
        req: TurnRequest,
        system: str,
        tools: list[dict] | None,
        ctx: ToolContext,
        registry: ToolRegistry,
        new: list[dict],
    ) -> tuple[list[dict], _TurnFit]:
        """The history to send with this turn, compacted first when the request would pass
        the threshold; and the state for the loop's fit hook."""
        await self.ready()
        model = self.session_model()
        b = self.budget(system, tools, model)
        summary, rows = self.view(req.session_key, model)
        # only what is new is counted: stored messages carry their count
        fresh = {id(m): self.count_message(m, model) for m in new}
        used = self.view_tokens(summary, rows) + sum(fresh.values())
        if rows and (used > b.trigger or len(rows) > b.history_limit):
            reason = "threshold" if used > b.trigger else "history_limit"
            with contextlib.suppress(BudgetRefused):  # over budget: the loop refuses the turn
                await self.compact(req, system, tools, ctx, registry, reason=reason)
            summary, rows = self.view(req.session_key, model)
        msgs = self.view_messages(summary, rows)
        fit = _TurnFit(budget=b, history_end=1 + len(msgs), model=model, counts=fresh)
        self.known_counts(fit.counts, summary, rows, msgs)
        return msgs, fit

    # ------------------------------------------------------------------- compaction
    async def compact(
        self,
        req: TurnRequest,
        system: str,
        tools: list[dict] | None,
        ctx: ToolContext,
        registry: ToolRegistry,
        *,
        reason: str,
        focus: str = "",
        keep_tokens: int | None = None,
    ) -> Outcome | None:
        """Replace the older part of the session's history by an updated summary.  Never
        raises for model failures; returns None when there is nothing to replace."""
        await self.ready()
        key = req.session_key
        model = self.session_model()
        b = self.budget(system, tools, model)
        epoch = self.store.session(key)["epoch"]
        summary, rows = self.view(key, model)
        before = self.view_tokens(summary, rows)
        cut = choose_cut(
            rows, b.keep_tokens if keep_tokens is None else keep_tokens, b.keep_messages
        )
        dropped = rows[:cut]
        if not dropped:
            return None
        self.gate.check(req.trust, "compaction")  # over budget: BudgetRefused, nothing compacted
        if req.trust == "owner" and req.kind != "subagent":
            await self._flush(req, system, ctx, registry, summary, rows, b)
        prev = summary["text"] if summary else ""
        text, source = await self._summarize(prev, dropped, b, focus)
        tokens = self.count_text(text)  # stored: agent.model's tokenizer, like the messages
        self.store.save_summary(
            key, dropped[-1].id, text, tokens, source=source, reason=reason, epoch=epoch
        )
        kept = self.count_text(text, model) if model != self.model else tokens
        after = kept + 30 + sum(r.tokens for r in rows[cut:])
        log.info(
            "compacted session=%s reason=%s messages=%d summary=%s tokens %d -> %d",
            key,
            reason,
            len(dropped),
            source,
            before,
            after,
        )
        return Outcome(len(dropped), source, before, after, text)

    async def _flush(
        self,
        req: TurnRequest,
        system: str,
        ctx: ToolContext,
        registry: ToolRegistry,
        summary: dict | None,
        rows: list[WindowRow],
        b: Budget,
    ) -> None:
        """One silent turn in which the model may write durable notes before the older
        messages leave its view.  Nothing is delivered or stored; failures are ignored."""
        from bot.agent.loop import run_agent_loop
        from bot.agent.tools import ToolRegistry

        tools = ToolRegistry([t for n in FLUSH_TOOLS if (t := registry.get(n)) is not None])
        if "write" not in tools and "edit" not in tools:
            return
        tz = ZoneInfo(self.cfg.agent.timezone) if self.cfg.agent.timezone else None
        path = f"memory/{datetime.now(tz).strftime('%Y-%m-%d')}.md"
        prompt = {"role": "user", "content": FLUSH_PROMPT.format(path=path)}
        room = (
            b.history
            - self.count_message(prompt, self.session_model())
            - (summary["tokens"] + 30 if summary else 0)
        )
        start = (
            choose_cut(rows, max(0, room), len(rows)) if self.view_tokens(None, rows) > room else 0
        )
        messages = [
            {"role": "system", "content": system},
            *self.view_messages(summary, rows[start:]),
            prompt,
        ]
        try:
            await asyncio.wait_for(
                run_agent_loop(
                    self.main_llm,
                    messages,
                    tools,
                    ctx,
                    native_tools=self.cfg.agent.native_tools,
                    max_iterations=FLUSH_MAX_STEPS,
                    reasoning_tags=self.cfg.agent.reasoning_tags,
                    budget=lambda: self.gate.refusal(req.trust),
                ),
                timeout=FLUSH_TIMEOUT,
            )
        except TimeoutError:
            log.warning("memory flush timed out session=%s", req.session_key)
        except Exception:
            log.exception("memory flush failed session=%s", req.session_key)

    async def _summarize(
        self, previous: str, dropped: list[WindowRow], b: Budget, focus: str
    ) -> tuple[str, str]:
        cap = b.summary_cap
        try:
            body = self._summary_request(previous, dropped, b, focus)
            timeout = min(self.cfg.agent.llm_timeout_seconds, SUMMARY_TIMEOUT)
            # one attempt: a failed or slow summary costs one timeout at most, then the
            # fallback summary keeps the session going
            client = self._llm_factory(
                self.summary_model, timeout=timeout, max_retries=0, extra={"max_tokens": cap}
            )
            comp = await asyncio.wait_for(
                client.complete(
                    [
                        {"role": "system", "content": SUMMARY_INSTRUCTIONS},
                        {"role": "user", "content": body},
                    ],
                    None,
                ),
                timeout=timeout + 10,
            )
            text = (comp.text or "").strip()
            if not text:
                raise LLMError("empty summary")
            return clip_to_tokens(text, cap, self.count_text), "model"
        except asyncio.CancelledError:
            raise
        except (TimeoutError, LLMError) as e:
            log.warning(
                "summary call failed (%s); summarizing without the model",
                getattr(e, "user_message", e),
            )
        except Exception:
            log.exception("summary call failed; summarizing without the model")
        return fallback_summary(previous, dropped, cap, self.count_text), "fallback"

    def _summary_request(
        self, previous: str, dropped: list[WindowRow], b: Budget, focus: str
    ) -> str:
        cap = b.summary_cap
        # the summary request must fit the summary model's window too (not the session's:
        # a session on a bigger model than the summary model must not overflow it):
        # instructions, previous summary, the answer (cap) and a margin come off first;
        # the transcript gets the rest
        window = self.window(self.summary_model)
        room = (
            window
            - reserve_for(window)
            - cap
            - self.count_text(SUMMARY_INSTRUCTIONS)
            - self.count_text(previous)
            - 200
        )
        lines = transcript_lines(dropped)
        transcript = "\n".join(lines)
        n = self.count_text(transcript)
        if n > room:
            short = transcript_lines(dropped, line_chars=300, tool_chars=120)
            transcript = "\n".join(short)
            n = self.count_text(transcript)
            while n > room and len(short) > 2:
                half = len(short) // 2
                gap = max(1, len(short) // 4)
                omitted = short[half - gap // 2 : half - gap // 2 + gap]
                short = short[: half - gap // 2] + short[half - gap // 2 + gap :]
                short.insert(half - gap // 2, f"[... {len(omitted)} lines omitted ...]")
                transcript = "\n".join(short)
                n = self.count_text(transcript)
            if n > room:
                transcript = clip_to_tokens(transcript, max(0, room), self.count_text)
        parts = [
            f"Previous summary:\n{previous.strip() or '(none yet)'}",
            f"Messages leaving the view, oldest first:\n{transcript}",
        ]
        if focus.strip():
            parts.append(f"Pay particular attention to: {focus.strip()[:500]}")
        parts.append(f"Write the updated summary in at most {cap} tokens.")
        return "\n\n".join(parts)

    # ------------------------------------------------------------------- loop hook
    def fitter(
        self,
        req: TurnRequest,
        system: str,
        tools: list[dict] | None,
        ctx: ToolContext,
        registry: ToolRegistry,
        state: _TurnFit,
    ) -> Callable[[list[dict], bool], Awaitable[list[dict]]]:
        """The loop's hook, called before every model request (``overflow`` False) and
        after a context-overflow error (``overflow`` True): returns the messages to send,
        compacting stored history and, as a last resort, cutting long contents."""

        def tokens_of(convo: list[dict]) -> int:
            total = state.budget.system + state.budget.tools
            for m in convo[1:]:
                n = state.counts.get(id(m))
                if n is None:
                    n = state.counts[id(m)] = self.count_message(m, state.model)
                total += n
            return total

        async def fit(convo: list[dict], overflow: bool) -> list[dict]:
            limit = state.budget.request_limit
            total = tokens_of(convo)
            if not overflow and total <= limit:
                return convo
            target = (
                limit
                if not overflow
                else int(min(total, limit) * (0.7 if state.shrinks == 0 else 0.4))
            )
            log.info(
                "request over budget session=%s tokens=%d target=%d overflow=%s",
                req.session_key,
                total,
                target,
                overflow,
            )
            if not state.compacted and state.history_end > 1:
                state.compacted = True
                await self.compact(
                    req,
                    system,
                    tools,
                    ctx,
                    registry,
                    reason="overflow" if overflow else "turn",
                    keep_tokens=0 if overflow else state.budget.keep_tokens // 2,
                )
                summary, rows = self.view(req.session_key, state.model)
                hist = self.view_messages(summary, rows)
                self.known_counts(state.counts, summary, rows, hist)
                convo = [convo[0], *hist, *convo[state.history_end :]]
                state.history_end = 1 + len(hist)
                total = tokens_of(convo)
                if total <= target:
                    return convo
            state.shrinks += 1
            return self._shrink(convo, target, tokens_of)

        return fit

    def _shrink(
        self, convo: list[dict], target: int, tokens_of: Callable[[list[dict]], int]
    ) -> list[dict]:
        """Cut the longest message contents (copies; the stored turn keeps its text) until
        the request fits ``target``."""
        convo = list(convo)
        for _ in range(60):
            if tokens_of(convo) <= target:
                break
            idx, longest = -1, 0
            for i, m in enumerate(convo[1:], 1):
                c = m.get("content")
                if isinstance(c, str) and len(c) > longest:
                    idx, longest = i, len(c)
            if idx < 0 or longest < 200:
                break
            c = convo[idx]["content"]
            keep = len(c) // 2
            convo[idx] = {
                **convo[idx],
                "content": c[:keep] + f"\n[... {len(c) - keep} characters cut to fit the "
                "model's context window]",
            }
        return convo

    # ----------------------------------------------------------------------- report
    async def usage(self, key: str, system: str, tools: list[dict] | None) -> dict:
        await self.ready()
        b = self.budget(system, tools)
        summary, rows = self.view(key)
        hist = sum(r.tokens for r in rows)
        stok = summary["tokens"] + 30 if summary else 0
        return {
            "window": b.window,
            "system_tokens": b.system,
            "tool_tokens": b.tools,
            "reserve": b.reserve,
            "budget": b.history,
            "threshold_tokens": b.trigger,
            "summary_tokens": stok,
            "history_tokens": hist,
            "history_messages": len(rows),
            "used": stok + hist,
            "compactions": self.store.summary_count(key),
            "enabled": self.c.enabled,
        }
