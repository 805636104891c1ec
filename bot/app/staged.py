"""The two-stage start of ``chela run`` (:mod:`bot.app.daemon`): the channels poll while the
core's modules load.

* :class:`Gate`: the channels' sink waits here until the core exists.  A waiting message is
  not taken from the platform (Telegram's offset is not confirmed past it), so a stop in the
  meantime raises :class:`GateClosed`, which the channel treats as a failed sink, and the
  platform delivers the message again after the next start.  That record is no fault: the log
  handlers of ``chela run`` drop it (:func:`not_gate_closed`) and the daemon says once how
  many messages waited.
* :func:`import_core`: :mod:`bot.app.core` imported in a daemon thread, so the loop keeps
  polling and a stop is never held by an import.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import importlib
import logging
import threading
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bot.config import Config

log = logging.getLogger("chela.daemon")


class GateClosed(Exception):
    """The daemon stopped while this message waited for the core; it was not taken."""


def not_gate_closed(record: logging.LogRecord) -> bool:
    """A log filter: False for a record that carries a :class:`GateClosed` (a channel's
    "sink failed" at a stop during start-up), True for everything else."""
    exc = record.exc_info[1] if record.exc_info else None
    return not isinstance(exc, GateClosed)


async def first_of(*events: asyncio.Event) -> None:
    """Return once any of ``events`` is set."""
    waits = [asyncio.ensure_future(e.wait()) for e in events]
    try:
        await asyncio.wait(waits, return_when="FIRST_COMPLETED")
    finally:
        for w in waits:
            w.cancel()


class Gate:
    """Closed until the core takes messages; :meth:`wait` is awaited by the channels' sink."""

    def __init__(self) -> None:
        self._open = asyncio.Event()
        self.waiting = 0  # messages held here (at a stop: left with the platform)

    @property
    def is_open(self) -> bool:
        return self._open.is_set()

    def open(self) -> None:
        self._open.set()

    async def wait(self, channel: str, stop: asyncio.Event) -> None:
        """Return once the gate is open; raise :class:`GateClosed` if ``stop`` comes first."""
        if self._open.is_set():
            return
        log.info("channel %s: a message waits for the core to be built", channel)
        self.waiting += 1
        await first_of(self._open, stop)
        if not self._open.is_set():  # still counted: the stop reports it
            raise GateClosed("the daemon stopped before it could take this message")
        self.waiting -= 1


def _load_core(cfg: Config, done: concurrent.futures.Future[ModuleType]) -> None:
    """The core's imports, off the loop: litellm's (in its own thread) when a model needs it,
    the plugins' modules (``load_plugins`` then finds them imported, or logs why not), then
    :mod:`bot.app.core`, the module itself set on ``done``; an error is set on it instead."""
    try:
        from bot.agent import preload
        from bot.model import litellm_needed

        if litellm_needed(cfg):  # an openai-compatible config never imports litellm
            preload.start()
        for plugin in cfg.plugins:
            with contextlib.suppress(Exception):  # logged and skipped by load_plugins
                importlib.import_module((plugin.module or "").strip())
        done.set_result(importlib.import_module("bot.app.core"))
    except BaseException as e:  # raised on the loop, as an error of the build would be
        done.set_exception(e)


async def import_core(cfg: Config, stop: asyncio.Event) -> ModuleType | None:
    """:mod:`bot.app.core`, imported in a daemon thread and awaited on the loop; None when
    ``stop`` comes first.  A daemon thread, not the loop's executor: ``asyncio.run`` would
    join an executor thread at exit, holding a stop for the rest of the import."""
    done: concurrent.futures.Future[ModuleType] = concurrent.futures.Future()
    done.set_running_or_notify_cancel()  # a waiter that gives up cannot cancel it under the thread
    thread = threading.Thread(target=_load_core, args=(cfg, done), name="core-import")
    thread.daemon = True
    thread.start()
    imported = asyncio.wrap_future(done)
    stopping: asyncio.Future[Any] = asyncio.ensure_future(stop.wait())
    await asyncio.wait({imported, stopping}, return_when="FIRST_COMPLETED")
    stopping.cancel()
    if not imported.done():
        imported.cancel()  # the thread finishes on its own; the process does not wait for it
        return None
    return imported.result()
