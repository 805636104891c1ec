"""The one disk-full alarm: what counts as "the disk is full", and saying so once.

:func:`disk_full` recognises a write refused for lack of space wherever it comes from:
``OSError`` ENOSPC/EDQUOT (a file written under the state dir) and SQLite's SQLITE_FULL
("database or disk is full": a full file system, or the database's page limit).
:class:`DiskAlarm` turns the failures into one episode: one log line naming the state dir
when writes start failing, one when they work again, and one owner/UI notice for each
(``storage.full`` / ``storage.ok``), never one per failed write or per message."""

from __future__ import annotations

import errno
import logging
import sqlite3
import time
from collections.abc import Callable
from typing import Any

log = logging.getLogger("chela.store")

NO_SPACE = (errno.ENOSPC, errno.EDQUOT)

# (notice name, data) → published for the owner and the Control UI (bot.reports.notices)
Publish = Callable[[str, dict[str, Any]], object]


def disk_full(e: BaseException | None) -> bool:
    """``e`` (or an exception it was raised from) is a write refused for lack of space."""
    seen = 0
    while e is not None and seen < 8:  # a short chain: raise ... from ... a few times at most
        if isinstance(e, OSError) and e.errno in NO_SPACE:
            return True
        if isinstance(e, sqlite3.OperationalError) and _sqlite_full(e):
            return True
        e = e.__cause__ or e.__context__
        seen += 1
    return False


def _sqlite_full(e: sqlite3.OperationalError) -> bool:
    code = getattr(e, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF == sqlite3.SQLITE_FULL
    return "disk is full" in str(e).lower()


class DiskAlarm:
    """Says once, naming the state dir, that writes fail for lack of space, and once that they
    work again.  Small writes may still fit while big ones fail, so "works again" needs
    ``streak`` durable writes in a row without a failure, or one ``settle`` seconds after the
    last failure.  ``publish``: where the owner's notices go (none: the log only)."""

    def __init__(
        self,
        where: str,
        publish: Publish | None = None,
        *,
        settle: float = 5.0,
        streak: int = 20,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.where = where
        self.publish = publish
        self.settle = settle
        self.streak = streak
        self.clock = clock
        self.full = False
        self._last_failure = 0.0
        self._ok_in_a_row = 0

    def failed(self, e: BaseException) -> None:
        self._last_failure = self.clock()
        self._ok_in_a_row = 0
        if self.full:
            return
        self.full = True
        log.error(
            "disk full: the state dir %s has no space left, so writes fail (%s). Nothing is "
            "lost: messages wait and are answered once there is room; free some disk space there",
            self.where,
            e,
        )
        if self.publish is not None:
            self.publish("storage.full", {"where": self.where, "error": str(e)})

    def ok(self) -> None:
        if not self.full:
            return
        self._ok_in_a_row += 1
        settled = self.clock() - self._last_failure >= self.settle
        if settled or self._ok_in_a_row >= self.streak:
            self.full = False
            log.warning("disk space is back: the state dir %s has room again", self.where)
            if self.publish is not None:
                self.publish("storage.ok", {"where": self.where})
