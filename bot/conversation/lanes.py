"""Per-session lanes (docs/architecture.md "the store is the bus": intake writes the
inbound row, lanes order the work per session).

A lane runs the jobs of one session one at a time in submission order; different
sessions run concurrently, bounded by a global limit.  (The session keys are
``bot.rules.keys``.)"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable

log = logging.getLogger("chela.sessions")


Job = Callable[[], Awaitable[object]]


class SessionLanes:
    def __init__(self, max_concurrent: int = 8):
        self._queues: dict[str, deque[tuple[Job, asyncio.Future]]] = {}
        self._workers: dict[str, asyncio.Task] = {}
        self._running: set[str] = set()
        self._current: dict[str, asyncio.Future] = {}
        self._sem = asyncio.Semaphore(max_concurrent)
        self.closed = False

    def busy(self, key: str) -> bool:
        return key in self._running or bool(self._queues.get(key))

    def running(self) -> int:
        """How many jobs are running now (one per session at most)."""
        return len(self._running)

    def cancel(self, key: str) -> bool:
        """Cancel the job running on the lane of ``key`` (e.g. Ctrl-C in ``chela chat``);
        queued jobs still run.  True when there was one to cancel."""
        task = self._current.get(key)
        if task is None or task.done():
            return False
        task.cancel()
        return True

    def submit(self, key: str, job: Job) -> asyncio.Future:
        """Queue ``job`` on the lane of ``key``; the returned future has its result."""
        fut: asyncio.Future = asyncio.get_running_loop().create_future()
        if self.closed:
            fut.set_exception(RuntimeError("shutting down"))
            return fut
        self._queues.setdefault(key, deque()).append((job, fut))
        if key not in self._workers:
            self._workers[key] = asyncio.create_task(self._work(key), name=f"lane:{key}")
        return fut

    async def _work(self, key: str) -> None:
        q = self._queues[key]
        try:
            while q:
                job, fut = q.popleft()
                if fut.cancelled():
                    continue
                await self._run_one(key, job, fut)
        finally:
            self._workers.pop(key, None)
            if not q:
                self._queues.pop(key, None)

    async def _run_one(self, key: str, job: Job, fut: asyncio.Future) -> None:
        """Run one queued job of the lane of ``key`` and settle its future."""
        async with self._sem:
            self._running.add(key)
            task = asyncio.ensure_future(job())
            self._current[key] = task
            try:
                result = await task
            except asyncio.CancelledError:
                if not fut.done():
                    fut.cancel()
                me = asyncio.current_task()
                if me is None or me.cancelling() or not task.cancelled():
                    raise
                # only this job was cancelled (cancel()): the lane goes on with the next
                log.info("job cancelled on %s", key)
            except Exception as e:  # the job logs its own details
                log.exception("job failed on %s", key)
                if not fut.done():
                    fut.set_exception(e)
            else:
                if not fut.done():
                    fut.set_result(result)
            finally:
                self._current.pop(key, None)
                self._running.discard(key)

    async def drain(self, timeout: float) -> bool:
        """Stop taking jobs and wait for the running ones; True when all finished."""
        self.closed = True
        for q in self._queues.values():
            while q:
                _, fut = q.popleft()
                fut.cancel()
        tasks = list(self._workers.values())
        if not tasks:
            return True
        _done, pending = await asyncio.wait(tasks, timeout=timeout)
        for t in pending:
            t.cancel()
        if pending:
            await asyncio.wait(pending, timeout=1)
        return not pending
