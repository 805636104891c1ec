"""What the Control UI watches besides the notices: the daemon's recent log lines (scrubbed,
for ``GET /ui/api/logs`` and the events stream's ``log.line``), and the sessions that changed
(``session.updated``), both built while the UI app runs."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

from bot import fs
from bot.reports.notices import Notices
from bot.store import Store
from bot.ui.api.transcript import channel_of
from channels.redact import redact_values

KEEP_LINES = 2000  # log lines kept for GET /ui/api/logs
SESSION_POLL = 1.0  # seconds between two looks for sessions that changed
LEVELS = {"debug": 10, "info": 20, "warning": 30, "warn": 30, "error": 40, "critical": 50}


def secret_values(cfg: Any) -> list[str]:
    """Every value no UI answer may hold: the config's secrets (``*_env`` keys, ``${VAR}``
    references, ``*_API_KEY`` variables) and the HTTP token Chela generated."""
    values = list(cfg.secret_values())
    values += [v for k, v in os.environ.items() if k.endswith("_API_KEY") and len(v) >= 8]
    with contextlib.suppress(OSError):
        token = fs.read_in(cfg.http_token_path, 4096).decode("utf-8", "replace").strip()
        if token:
            values.append(token)
    return values


def scrub(text: str, secrets: Iterable[str]) -> str:
    return redact_values(text, tuple(secrets))


def scrub_data(data: Any, secrets: tuple[str, ...]) -> Any:
    """JSON data with every string scrubbed (platform errors, previews, log lines)."""
    if isinstance(data, str):
        return redact_values(data, secrets) if secrets else data
    if isinstance(data, dict):
        return {k: scrub_data(v, secrets) for k, v in data.items()}
    if isinstance(data, list):
        return [scrub_data(v, secrets) for v in data]
    return data


class LogHub(logging.Handler):
    """Keeps the last ``KEEP_LINES`` lines of the ``chela`` loggers, scrubbed, numbered, and
    hands each new one to ``on_line`` (the events stream publishes it)."""

    def __init__(self, secrets: Callable[[], Iterable[str]], keep: int = KEEP_LINES) -> None:
        super().__init__(logging.DEBUG)
        self._secrets = secrets
        self.lines: deque[dict[str, Any]] = deque(maxlen=keep)
        self.seq = 0
        self.listeners: set[Callable[[dict[str, Any]], None]] = set()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = record.getMessage()
            if record.exc_info and record.exc_info[1] is not None:
                message += "\n" + logging.Formatter().formatException(record.exc_info)
        except Exception:
            return
        self.seq += 1
        line = {
            "seq": self.seq,
            "time": record.created,
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": scrub(message, self._secrets()),
        }
        self.lines.append(line)
        for listener in tuple(self.listeners):
            with contextlib.suppress(Exception):
                listener(line)

    def select(self, level: str, since: float | None, limit: int) -> list[dict[str, Any]]:
        floor = LEVELS.get(level.lower(), 0) if level else 0
        out = [
            ln
            for ln in self.lines
            if LEVELS.get(ln["level"], 0) >= floor and (since is None or ln["time"] > since)
        ]
        return out[-limit:]

    def attach(self, logger: logging.Logger) -> None:
        logger.addHandler(self)

    def detach(self, logger: logging.Logger) -> None:
        logger.removeHandler(self)


class SessionWatch:
    """Publishes ``session.updated`` for every session whose last activity moved (any
    channel's turn, a web turn, a reset), by looking at the store every second."""

    def __init__(self, store: Store, notices: Notices) -> None:
        self.store = store
        self.notices = notices
        self._last = self._newest()
        self._task: asyncio.Task | None = None

    def _newest(self) -> float:
        return self.store.newest_session_update()

    def look(self) -> int:
        rows = self.store.sessions_updated_after(self._last)
        for key, updated in rows:
            self.notices.publish(
                "session.updated",
                {"key": key, "channel": channel_of(key), "last_activity": updated},
            )
            self._last = max(self._last, updated)
        return len(rows)

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(SESSION_POLL)
            try:
                self.look()
            except Exception as e:  # a closed store at shutdown, a full disk
                logging.getLogger("chela.ui").debug("session watch: %s", e)

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._loop(), name="ui:sessions")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
