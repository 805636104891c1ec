"""The one backoff helper: how long to wait before the next try of something that failed.

Every retry loop in the project (a channel reconnecting, the outbox resending, the daemon
restarting a channel, a model call retried, a store write waiting for disk space) takes its
waits from a :class:`Backoff` instead of doubling a number by hand.  It lives at the bottom
(``channels/`` imports nothing of ``bot/``) so both sides use the same one."""

from __future__ import annotations

import random
from collections.abc import Callable

MAX_DOUBLINGS = 64  # past this many doublings any cap has long been reached


class Backoff:
    """Waits that start at ``initial`` seconds and grow by ``factor`` after each one, never
    above ``cap``.  ``jitter`` spreads each wait by up to that fraction either way (0.2:
    80 %–120 %), so many clients that failed together do not retry together.

    Use :meth:`next` for the wait before the next try and :meth:`reset` after a success;
    :meth:`delay` is the wait before try number ``attempt`` (0-based) without any state."""

    def __init__(
        self,
        initial: float,
        cap: float,
        *,
        factor: float = 2.0,
        jitter: float = 0.0,
        rand: Callable[[], float] = random.random,
    ) -> None:
        self.initial = initial
        self.cap = cap
        self.factor = factor
        self.jitter = jitter
        self.rand = rand
        self.attempt = 0

    def delay(self, attempt: int) -> float:
        """The wait before the retry that follows ``attempt`` earlier retries."""
        wait = min(self.cap, self.initial * self.factor ** min(attempt, MAX_DOUBLINGS))
        if self.jitter:
            wait *= 1.0 - self.jitter + 2.0 * self.jitter * self.rand()
        return wait

    def peek(self) -> float:
        """The wait :meth:`next` will give (before jitter), for a log line said first."""
        return min(self.cap, self.initial * self.factor ** min(self.attempt, MAX_DOUBLINGS))

    def next(self) -> float:
        """The wait to use now; the one after it is longer (up to ``cap``)."""
        wait = self.delay(self.attempt)
        self.attempt += 1
        return wait

    def reset(self) -> None:
        """Back to ``initial``: the thing worked (or ran long enough to count as healthy)."""
        self.attempt = 0
