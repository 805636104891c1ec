"""Conversation behaviour that needs a platform with particular timing: a slow typing call, a
message that arrives while the daemon is starting, a store that cannot write."""

from __future__ import annotations

import asyncio

from channels.base import Capabilities
from channels.terminal import TerminalChannel
from tests.e2e import eventually, make_config, running
from tests.e2e.harness import settled
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
        await eventually(lambda: term.completed + term.cancelled)
    assert (term.completed, term.cancelled) == (1, 0)


async def test_a_message_arriving_during_start_up_is_answered_once(tmp_path, llm, capsys):
    # channels start before recover() runs: the same stored row must not be queued twice
    from channels.base import InboundMessage

    term = SlowTypingTerminal()
    term.gate.set()
    llm.script(text("one answer"), text("a second answer would be a duplicate"))
    async with running(
        make_config(tmp_path, llm), channels={"terminal": term}, scheduler=False
    ) as d:
        msg = InboundMessage(
            channel="terminal", chat_id="local", sender_id="me", text="hi", message_id="m-1"
        )
        await d.conversation.on_inbound(msg)
        assert await d.conversation.recover() == 0  # already queued by the live intake
        await settled(d)
    assert len(llm.requests) == 1


async def test_recover_still_queues_what_nobody_queued(tmp_path, llm, capsys):
    # the twin: a message stored before a crash is answered after the restart
    from bot.store import Store
    from channels.base import InboundMessage

    cfg = make_config(tmp_path, llm)
    msg = InboundMessage(
        channel="terminal", chat_id="local", sender_id="me", text="left over", message_id="m-2"
    )
    s = Store(cfg.db_path)
    s.add_inbound("terminal", "default", "local", "m-2", "agent:main:main", msg.to_json())
    s.close()
    term = SlowTypingTerminal()
    term.gate.set()
    llm.script(text("answered after restart"))
    async with running(cfg, channels={"terminal": term}, scheduler=False) as d:
        await llm.wait_for_requests(1, timeout=10)
        await settled(d)
    assert len(llm.requests) == 1 and "left over" in str(llm.requests[0]["messages"])


async def test_the_apology_goes_out_even_when_the_store_cannot_write(tmp_path, llm, capsys):
    term = TerminalChannel()
    holder = {}

    def disk_fills_up(request):
        holder["d"].store.db.execute(
            "PRAGMA query_only = ON"
        )  # every write fails from now, like a full disk
        return text("this answer cannot be stored")

    llm.script(disk_fills_up, text("fine again"))
    async with running(
        make_config(tmp_path, llm), channels={"terminal": term}, scheduler=False
    ) as d:
        holder["d"] = d
        await term.ask("hello")
        assert "Sorry, something went wrong" in capsys.readouterr().out
        d.store.db.execute("PRAGMA query_only = OFF")  # the twin: space is back, turns work
        await term.ask("again")
        assert "fine again" in capsys.readouterr().out


async def test_a_lone_surrogate_from_the_model_is_stored_and_delivered(tmp_path, llm, capsys):
    term = TerminalChannel()
    llm.script(text("odd \ud800 answer"), text("plain answer"))
    async with running(make_config(tmp_path, llm), channels={"terminal": term}, scheduler=False):
        await term.ask("hello")
        assert "odd \ufffd answer" in capsys.readouterr().out
        await term.ask("again")  # the twin: ordinary text as before
        assert "plain answer" in capsys.readouterr().out
