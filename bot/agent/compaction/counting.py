"""Counting for the compaction plan: the window and tokenizer of the model the
session's next turn uses (its ``/model`` choice), stored counts used as they
are, and only what is new counted.

Stored messages carry their token count, made with ``agent.model``'s tokenizer (the
Store's ``token_counter`` is :func:`message_counter`).  A session on a model whose
tokenizer may differ (litellm counting and another model) gets each stored message
recounted with its own tokenizer once, then cached by message id, so the counts stay exact
for the model the request goes to; the estimate (light path) is the same for every model
and is never recounted."""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any
from collections.abc import Callable

from bot.model import context_window, litellm_needed, litellm_path, prices
from bot.model.choice import CHOICE
from bot.store import Store, WindowRow, estimate_tokens

from .plan import (
    DEFAULT_WINDOW,
    LOAD_LIMIT,
    Budget,
    configured_window,
    model_window,
    reserve_for,
)
from .window import WindowCache

if TYPE_CHECKING:
    from bot.config import Config


def message_counter(cfg: Config, model: str = "") -> Callable[[dict], int]:
    """How a stored message's tokens are counted, given to the Store when the app
    builds it: litellm's tokenizer for the configured model (or ``model``) when this config
    counts with litellm (never for a light-path-only config, so counts do not depend on
    whether something else imported litellm), else the estimate."""
    if not litellm_needed(cfg):
        # the estimate itself, so the store takes it from the JSON it has just built
        return estimate_tokens
    model = model or cfg.agent.model

    def count(message: dict) -> int:
        litellm = litellm_path.loaded()
        if litellm is None:  # still importing: the estimate meanwhile
            return estimate_tokens(message)
        try:
            return int(litellm.token_counter(model=model, messages=[message]))
        except Exception:
            return estimate_tokens(message)

    return count


class Counting:
    """The counting half of the :class:`~bot.agent.compaction.Compactor`."""

    def __init__(self, cfg: Config, store: Store, main_llm: Any):
        self.cfg = cfg
        self.store = store
        self.c = cfg.agent.compaction
        self.model = cfg.agent.model
        self.main_llm = main_llm
        self._windows: dict[str, int] = {}  # model -> window, once its metadata is known
        self._litellm_needed = litellm_needed(cfg)
        # the system prompt's and the tool schemas' tokens by (model, text): the same text
        # every turn, and litellm's tokenizer takes 0.5-0.8 ms over the default 4.9 KB
        # prompt (gpt-4o / claude, measured), several ms over a workspace's bootstrap files
        self._text_tokens: dict[tuple[str, str], int] = {}
        self._counters: dict[str, Callable[[dict], int]] = {self.model: message_counter(cfg)}
        # stored counts are made with agent.model's tokenizer; a session on a model whose
        # tokenizer differs gets each stored message recounted once: (message id, model)
        self._recounts: dict[tuple[int, str], int] = {}
        self._views = WindowCache(store, LOAD_LIMIT)  # decoded once, not every turn

    # ------------------------------------------------------------------- counting
    async def ready(self) -> None:
        """litellm's token counter when litellm is loaded or needed; a config whose models
        all take the light path counts by estimate and never imports it."""
        if litellm_path.loaded() is None and self._litellm_needed:
            await litellm_path.litellm()
        elif not self._litellm_needed and not prices.loaded():
            # the light path's windows come from the price table: parsed once (~60 ms),
            # in a thread, not on the event loop inside the first turn's plan
            await asyncio.to_thread(prices.load)

    def _counter(self) -> Any:
        """litellm, when this config counts with it (never for a light-path-only config, so
        counts do not depend on whether something else imported litellm)."""
        return litellm_path.loaded() if self._litellm_needed else None

    def session_model(self) -> str:
        """The model this turn's calls use: the session's ``/model`` choice,
        set by the run stage around the turn for the main client, else ``agent.model``."""
        choice = CHOICE.get()
        if choice is not None and choice.client is self.main_llm and choice.model:
            return choice.model
        return self.model

    def _same_tokenizer(self, model: str) -> bool:
        """Whether counts made with agent.model's tokenizer hold for ``model``: always for
        the estimate (it does not depend on the model), else only for agent.model itself."""
        return model == self.model or self._counter() is None

    def count_message(self, message: dict, model: str = "") -> int:
        model = model or self.model
        count = self._counters.get(model)
        if count is None:
            count = self._counters[model] = message_counter(self.cfg, model)
        return count(message)

    def count_text(self, text: str, model: str = "") -> int:
        litellm = self._counter()
        if litellm is None or not text:
            return len(text) // 4 + 1
        try:
            return int(litellm.token_counter(model=model or self.model, text=text))
        except Exception:
            return len(text) // 4 + 1

    def _cached_text(self, text: str, model: str) -> int:
        key = (model, text)
        n = self._text_tokens.get(key)
        if n is None:
            if len(self._text_tokens) > 256:
                self._text_tokens.clear()
            n = self._text_tokens[key] = self.count_text(text, model) + 8
        return n

    def _tools_count(self, tools: list[dict], model: str) -> int:
        """The tool schemas' tokens (their JSON counted as text)."""
        return self._cached_text(json.dumps(tools, ensure_ascii=False, sort_keys=True), model)

    def window(self, model: str = "") -> int:
        """The context window of ``model`` (default: the session's): configured for it
        (agent.compaction.context_window for agent.model, the context_window of its
        ``[agent.models]`` or fallback table otherwise), else its metadata (litellm's, or
        the price table's on the light path), else agent.compaction.context_window, else
        32000."""
        model = model or self.session_model()
        w = self._windows.get(model)
        if w is not None:
            return w
        configured = configured_window(self.cfg.agent, model)
        if configured:
            w = self._windows[model] = configured
            return w
        known = model_window(model) if self._litellm_needed else context_window(model)
        w = known or self.c.context_window or DEFAULT_WINDOW
        if litellm_path.loaded() is not None or not self._litellm_needed:
            self._windows[model] = w  # metadata known: remember it
        return w

    def budget(self, system: str, tools: list[dict] | None, model: str = "") -> Budget:
        model = model or self.session_model()
        w = self.window(model)
        system_tokens = self._cached_text(system, model)
        tool_tokens = self._tools_count(tools, model) if tools else 0
        return Budget(
            window=w,
            system=system_tokens,
            tools=tool_tokens,
            reserve=reserve_for(w),
            threshold=self.c.threshold,
            keep_recent=self.c.keep_recent_tokens,
            summary_max=self.c.summary_max_tokens,
            history_limit=self.cfg.agent.history_limit,
        )

    # --------------------------------------------------------------------- history
    def view(self, key: str, model: str = "") -> tuple[dict | None, list[WindowRow]]:
        """The session's summary and the messages after it, their token counts (the stored
        ones) good for ``model``'s tokenizer (default: the session's).  The rows are the
        decoded view's own (read them; a request gets copies: ``view_messages``)."""
        # the session's epoch and summary are read once and handed down: the window's
        # query starts after that summary without looking either up again
        epoch = self.store.session(key)["epoch"]
        summary = self.store.summary(key, epoch=epoch)
        rows = self._views.held(key, summary, epoch)  # read only: never changed here
        model = model or self.session_model()
        if self._same_tokenizer(model):
            return summary, rows
        return self._recounted_summary(summary, model), [self._recounted(r, model) for r in rows]

    def _recounted(self, row: WindowRow, model: str) -> WindowRow:
        key = (row.id, model)
        n = self._recounts.get(key)
        if n is None:
            if len(self._recounts) > 50_000:
                self._recounts.clear()
            n = self._recounts[key] = self.count_message(row.message, model)
        return WindowRow(row.id, row.role, row.message, n)

    def _recounted_summary(self, summary: dict | None, model: str) -> dict | None:
        if summary is None:
            return None
        key = (-int(summary["id"]), model)  # summaries' ids apart from messages'
        n = self._recounts.get(key)
        if n is None:
            n = self._recounts[key] = self.count_text(summary["text"], model)
        return {**summary, "tokens": n}
