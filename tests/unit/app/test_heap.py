"""bot.app.heap: the collector's state around a daemon's life (the process-level behaviour of
`chela run` is tests/e2e/test_start_gc.py)."""

from __future__ import annotations

import gc

from bot.app import heap


def test_settle_freezes_what_lives_and_turns_the_collector_on_release_hands_it_back():
    was = gc.isenabled()
    gc.disable()
    try:
        kept = [object() for _ in range(1000)]
        heap.settle()
        assert gc.isenabled()
        assert gc.get_freeze_count() >= len(kept)
        heap.release()
        assert gc.isenabled()
        assert gc.get_freeze_count() == 0
    finally:
        gc.unfreeze()
        if not was:
            gc.disable()


def test_garbage_made_after_settle_is_still_collected():
    heap.settle()
    try:
        cycle: list = []
        cycle.append(cycle)
        del cycle
        assert gc.collect() >= 1
    finally:
        heap.release()
