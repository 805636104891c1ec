"""The compaction plan of a light-path config (SPEC §12) takes the model's window from the
price table: the first turn after a start has it parsed in a thread (``Counting.ready``),
never on the event loop, where its ~60 ms stalled every channel; the window is the table's
either way."""

from __future__ import annotations

import threading

from bot.model import prices
from bot.store import Store
from tests.unit.agent.test_compaction_plan import compactor, config


async def test_the_price_table_is_parsed_off_the_event_loop(tmp_path, monkeypatch):
    monkeypatch.setattr(prices, "_table", None)  # as after a start
    real = prices.load
    calls: list[tuple[bool, bool]] = []  # (on this thread, the table was parsed already)

    def spy():
        calls.append((threading.get_ident() == loop_thread, prices.loaded()))
        return real()

    loop_thread = threading.get_ident()
    monkeypatch.setattr(prices, "load", spy)
    comp = compactor(config(tmp_path, "openai/gpt-4o-mini"), Store(":memory:"))
    await comp.ready()
    assert prices.loaded()
    window = comp.window()
    assert (True, False) not in calls  # never parsed on the event loop's thread
    assert window == prices.context_window("openai/gpt-4o-mini") > 0
