"""The logged best-effort helper: a failure is said once, naming the action, and the caller
carries on; cancellation and interrupts are never swallowed; a block that works says nothing."""

import asyncio
import logging

import pytest

from channels.best_effort import best_effort

log = logging.getLogger("chela.test.best_effort")


def test_a_failure_is_logged_once_naming_the_action_and_the_caller_carries_on(caplog):
    caplog.set_level(logging.DEBUG, logger=log.name)
    after = []
    with best_effort(log, "showing typing"):
        raise ConnectionError("reset by peer")
    after.append("carried on")
    assert after == ["carried on"]
    [rec] = caplog.records
    assert rec.levelno == logging.DEBUG
    assert rec.getMessage() == "showing typing failed (carrying on): ConnectionError: reset by peer"


def test_the_level_is_the_callers(caplog):
    caplog.set_level(logging.DEBUG, logger=log.name)
    with best_effort(log, "sending the apology", level=logging.WARNING):
        raise RuntimeError("no route")
    assert [r.levelno for r in caplog.records] == [logging.WARNING]


def test_a_block_that_works_says_nothing(caplog):
    caplog.set_level(logging.DEBUG, logger=log.name)
    with best_effort(log, "closing a file"):
        done = True
    assert done and caplog.records == []


@pytest.mark.parametrize("exc", [asyncio.CancelledError, KeyboardInterrupt, SystemExit])
def test_cancellation_and_interrupts_pass_through(exc, caplog):
    caplog.set_level(logging.DEBUG, logger=log.name)
    with pytest.raises(exc), best_effort(log, "anything"):
        raise exc()
    assert caplog.records == []


async def test_a_cancelled_task_inside_stays_cancelled():
    async def typing_forever():
        with best_effort(log, "showing typing"):
            await asyncio.sleep(3600)

    task = asyncio.ensure_future(typing_forever())
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
