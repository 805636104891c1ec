"""Long conversations: a token budget for history, and compaction that cannot get stuck
.

The budget of a request is the model's context window minus the system prompt, the tool
schemas and a reserve for the answer.  Each stored message is counted once (the count is
a column of ``messages``); a turn adds up cached numbers, so its cost does not grow with
the session.  When the next request would pass ``threshold`` of the budget (or hold more
than ``history_limit`` messages), or the provider says the context overflowed, the older
part of the history is replaced by a summary:

* the recent tail stays verbatim, and a cut falls only before a user turn (so never
  between a tool call and its result);
* an owner session first gets one silent turn to write durable notes to
  ``memory/YYYY-MM-DD.md`` (file tools offered, nothing delivered, nothing stored);
* the summary call offers no tools and rewrites the previous summary with the dropped
  messages folded in; when it fails or times out a summary is built without the model;
* the summary and the marks on the messages it replaces are stored in one transaction.

The summary reaches the model as the first history message (role ``user``, labelled), so
the system prompt stays byte-identical across compactions.
"""

from __future__ import annotations

from .compactor import Compactor
from .counting import message_counter
from .plan import (
    DEFAULT_WINDOW,
    SUMMARY_INSTRUCTIONS,
    SUMMARY_LABEL,
    Budget,
    Outcome,
    choose_cut,
    clip_to_tokens,
    configured_window,
    fallback_summary,
    model_window,
    reserve_for,
    summary_message,
    transcript_lines,
)

__all__ = [
    "DEFAULT_WINDOW",
    "SUMMARY_INSTRUCTIONS",
    "SUMMARY_LABEL",
    "Budget",
    "Compactor",
    "Outcome",
    "choose_cut",
    "clip_to_tokens",
    "configured_window",
    "fallback_summary",
    "message_counter",
    "model_window",
    "reserve_for",
    "summary_message",
    "transcript_lines",
]
