"""The messages in a session's view, kept decoded between turns (the per-turn plan).

A turn's plan needs every message after the session's summary with its stored token
count.  Reading them all from the database decodes every message's JSON on every turn,
which grows with the session; stored messages never change, so this cache keeps the
decoded rows of the last sessions and asks the store only for the newest few: when they
overlap what is cached, the new ones are appended, otherwise (a compaction, ``/new``, a
turn that added more messages than the peek, a pruned session) the view is read whole.
Measured (file database, 200-600 character messages, process time): reading and decoding
the whole view costs 0.15 ms at 50 messages and 1.1 ms at 400, growing with the session
until compaction; this cache keeps a long session's turn at the cost of its newest rows.
``rows`` hands out copies of the message dicts (one level deep: nested lists such as
content parts or tool calls are shared; nothing on the way to the provider edits them in
place, and a stray edit would reach only this process's cache, never the database);
``held`` the rows themselves, for the compaction plan, which reads them and copies only
the messages a request carries.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Protocol

from bot.store import WindowRow

from .plan import is_turn_start

PEEK = 16  # the newest rows read to find what a session gained since its last turn
# sessions whose view stays decoded (the least recently used leaves): a view is at most
# about one context window of text (compaction keeps it there), so memory stays bounded;
# a session that left is read whole once on its next turn, as every turn was before
SESSIONS = 8


class _Source(Protocol):
    def window(
        self,
        key: str,
        *,
        limit: int,
        epoch: int | None = None,
        after: int | None = None,
        known: int = 0,
    ) -> list[WindowRow]: ...


class WindowCache:
    def __init__(
        self, store: _Source, limit: int, *, peek: int = PEEK, sessions: int = SESSIONS
    ) -> None:
        self.store = store
        self.limit = limit
        self.peek = peek
        self.sessions = sessions
        self._views: OrderedDict[str, tuple[int, list[WindowRow]]] = OrderedDict()
        self.full_reads = 0  # how many times a view was read whole (tests, benches)

    def rows(self, key: str, summary: dict | None, epoch: int | None = None) -> list[WindowRow]:
        """The session's messages after ``summary`` (the store's current one), newest
        ``limit`` of them, oldest first, never starting with a tool result: what
        ``Store.window`` returns.  With the session's ``epoch`` (read together with
        ``summary``) the store reads neither again."""
        # each turn gets its own message dicts (cheap, one level): a caller that replaces
        # a field of a message it sends (its content, say) cannot change the next turn's
        return [
            WindowRow(r.id, r.role, dict(r.message), r.tokens)
            for r in self.held(key, summary, epoch)
        ]

    def held(self, key: str, summary: dict | None, epoch: int | None = None) -> list[WindowRow]:
        """:meth:`rows` without the copies: the rows this cache holds, to be read and never
        changed (their messages go to a request only as copies, ``Compactor.view_messages``)."""
        mark = int(summary["id"]) if summary else 0
        # the store's window starts after this summary, in this epoch: no second look-up
        where = (
            {} if epoch is None else {"epoch": epoch, "after": summary["upto_id"] if summary else 0}
        )
        hit = self._views.get(key)
        rows = self._extended(key, hit[1], where) if hit is not None and hit[0] == mark else None
        if rows is None:
            self.full_reads += 1
            rows = self.store.window(key, limit=self.limit, **where)
        self._views[key] = (mark, rows)
        self._views.move_to_end(key)
        while len(self._views) > self.sessions:
            self._views.popitem(last=False)
        return rows

    def _extended(
        self, key: str, cached: list[WindowRow], where: dict[str, int]
    ) -> list[WindowRow] | None:
        """The cached view with the rows stored since, or None when the newest rows do not
        continue it (read the view whole then)."""
        if not cached:
            return None
        last = cached[-1].id
        # the rows already held are not decoded again (only their ids are compared)
        recent = self.store.window(key, limit=self.peek, known=last, **where)
        if not recent or recent[0].id > last:
            return None
        known = [r.id for r in recent if r.id <= last]
        if [r.id for r in cached[-len(known) :]] != known:
            return None
        new = [r for r in recent if r.id > last]
        if not new:
            return cached
        rows = [*cached, *new][-self.limit :]
        start = 0
        while start < len(rows) and not is_turn_start(rows[start]):
            start += 1
        return rows[start:]

    def forget(self, key: str) -> None:
        self._views.pop(key, None)
