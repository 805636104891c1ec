"""The helpers the adapters share."""

import asyncio

import pytest

from channels.base import wait_task_end
from channels.util import BoundedLRU, is_loopback, parse_listen
import contextlib


def test_bounded_lru_forgets_least_recently_used():
    lru = BoundedLRU(2)
    lru.put("a", 1)
    lru.put("b", 2)
    assert lru.get("a") == 1  # touching "a" makes "b" the oldest
    lru.put("c", 3)
    assert "b" not in lru and "a" in lru and "c" in lru and len(lru) == 2
    lru.put("d")
    assert lru.get("d") is True and "a" not in lru


@pytest.mark.parametrize(
    "value, expected",
    [
        ("127.0.0.1:8787", ("127.0.0.1", 8787)),
        ("[::1]:80", ("::1", 80)),
        (":3000", ("127.0.0.1", 3000)),
    ],
)
def test_parse_listen(value, expected):
    assert parse_listen(value) == expected


@pytest.mark.parametrize("value", ["nowhere", "host:port", "h:70000", ""])
def test_parse_listen_rejects(value):
    with pytest.raises(ValueError, match="bad listen address"):
        parse_listen(value)


# ---------------------------------------------------------------------------- wait_task_end


async def test_wait_task_end_returns_the_tasks_error_or_none():
    async def boom():
        raise RuntimeError("gateway closed: 4004")

    async def fine():
        return 1

    assert isinstance(await wait_task_end(asyncio.ensure_future(boom())), RuntimeError)
    assert await wait_task_end(asyncio.ensure_future(fine())) is None
    assert await wait_task_end(None) is None
    cancelled = asyncio.ensure_future(asyncio.sleep(10))
    cancelled.cancel()
    assert await wait_task_end(cancelled) is None


async def test_cancelling_the_waiter_leaves_the_task_running():
    task = asyncio.ensure_future(asyncio.sleep(10))
    waiter = asyncio.ensure_future(wait_task_end(task))
    await asyncio.sleep(0.01)
    waiter.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await waiter
    assert waiter.cancelled() and not task.done()
    task.cancel()


@pytest.mark.parametrize(
    "host, loopback",
    [
        ("127.0.0.1", True),
        ("127.0.0.53", True),
        ("::1", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("192.168.1.5", False),
        ("example.com", False),
        ("", False),
    ],
)
def test_is_loopback(host, loopback):
    assert is_loopback(host) is loopback
