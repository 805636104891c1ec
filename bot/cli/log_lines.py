"""The daemon's log lines, made once per record: ``chela run`` writes each line to stderr and
to its rotated log file, and the standard library would format a record three times for that
(once per handler, and again in the file handler's size check), look the file up on disk
twice and seek to its end, for every line.  At one "turn done" line a message that was a
tenth of a millisecond, about 3 % of what a message costs the daemon."""

from __future__ import annotations

import logging
import os
import stat
from logging.handlers import RotatingFileHandler

_LINE = "_chela_line"


class LineOnce(logging.Formatter):
    """A formatter whose line for a record is made once and reused by every handler that
    shares this formatter (a record is not changed between handlers: the filters that
    change one, the secret redaction, run before the first handler formats it)."""

    def format(self, record: logging.LogRecord) -> str:
        made = record.__dict__.get(_LINE)
        if made is not None and made[0] is self:
            return made[1]
        line = super().format(record)
        record.__dict__[_LINE] = (self, line)
        return line


class LogFile(RotatingFileHandler):
    """A :class:`RotatingFileHandler` that counts the bytes it writes instead of asking the
    file before every line.  It is the only writer of its file (the daemon holds the state
    directory's lock); the count starts from the file's size when it is opened.  A path
    that is not a regular file (``/dev/null``) is never rolled over, as the standard
    handler does."""

    def __init__(self, filename: str | os.PathLike[str], max_bytes: int, backups: int) -> None:
        super().__init__(filename, maxBytes=max_bytes, backupCount=backups, encoding="utf-8")
        self._size: int | None = None
        self._pending = 0

    def _written(self) -> int:
        if self._size is None:
            try:
                st = os.stat(self.baseFilename)
            except OSError:
                self._size = 0
            else:
                regular = stat.S_ISREG(st.st_mode)
                self._size = st.st_size if regular else -1  # -1: never roll over
        return self._size

    def shouldRollover(self, record: logging.LogRecord) -> bool:
        size = self._written()
        line = self.format(record) + self.terminator
        self._pending = len(line.encode("utf-8", "replace"))
        if size < 0 or self.maxBytes <= 0:
            return False
        return size > 0 and size + self._pending >= self.maxBytes

    def emit(self, record: logging.LogRecord) -> None:
        super().emit(record)
        if self._size is not None and self._size >= 0:
            self._size += self._pending

    def doRollover(self) -> None:
        super().doRollover()
        self._size = 0
