"""Router behaviour that needs a platform with particular timing."""

from __future__ import annotations

import asyncio

from channels.base import Capabilities
from channels.terminal import TerminalChannel
from tests.e2e import make_config, running
from tests.fakes.llm import text


class SlowTypingTerminal(TerminalChannel):
    """A terminal whose typing indicator is a slow platform call that is still in flight
    when the turn ends (like sendChatAction on a busy Bot API)."""

    capabilities = Capabilities(typing=True, proactive=False, max_text=1_000_000)

    def __init__(self, **kw):
        super().__init__(**kw)
        self.gate = asyncio.Event()
        self.started = 0
        self.completed = 0
        self.cancelled = 0

    async def typing(self, chat_id, thread_id=None):
        self.started += 1
        try:
            await self.gate.wait()
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        self.completed += 1


async def test_typing_call_in_flight_is_not_cancelled_when_the_turn_ends(tmp_path, llm, capsys):
    # Cancelling an HTTP request mid-flight leaked python-telegram-bot pool slots until
    # every send failed; the typing call must be allowed to finish on its own.
    term = SlowTypingTerminal()
    llm.script(text("done"))
    async with running(make_config(tmp_path, llm), channels={"terminal": term}, scheduler=False):
        await term.ask("hello")
        assert "done" in capsys.readouterr().out
        assert term.started == 1
        term.gate.set()
        await asyncio.sleep(0.05)
    assert (term.completed, term.cancelled) == (1, 0)
