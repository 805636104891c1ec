"""litellm's import, started as early as possible and awaited without holding a worker thread.

Importing litellm costs ~2 s of CPU and ~160 MB; nothing else in a turn comes close (the first
model call after the import takes ~20 ms).  ``chela run``, ``chela chat`` and ``chela heartbeat``
call :func:`start` before they even read the config, so the import overlaps config parsing,
opening the store and connecting the channels.

The import runs in a *daemon* thread, not in the event loop's executor: ``asyncio.run`` joins
executor threads at exit, so a stop requested while the import was still running used to wait
for it (2–10 s).  A daemon thread does not hold the process.  Callers await :func:`litellm`,
which waits on a future instead of parking an executor thread on the import lock.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from typing import Any

_future: concurrent.futures.Future[Any] | None = None
_lock = threading.Lock()


def start() -> concurrent.futures.Future[Any]:
    """Begin importing litellm in a daemon thread (once per process); returns at once."""
    global _future  # noqa: PLW0603 - one import per process
    with _lock:
        if _future is None:
            fut: concurrent.futures.Future[Any] = concurrent.futures.Future()
            fut.set_running_or_notify_cancel()  # a waiter that gives up cannot cancel the import

            def work() -> None:
                try:
                    from bot.model.lite import _load_litellm

                    fut.set_result(_load_litellm())
                except BaseException as e:  # an ImportError is reported to every waiter
                    fut.set_exception(e)

            threading.Thread(target=work, name="litellm-import", daemon=True).start()
            _future = fut
        return _future


def loaded() -> bool:
    return _future is not None and _future.done() and _future.exception() is None


async def litellm() -> Any:
    """The litellm module, importing it first if needed (never blocks the event loop)."""
    from bot.model import lite as llm

    if llm._litellm is not None:
        return llm._litellm
    return await asyncio.wrap_future(start())
