"""``chela chat``: talk to the assistant in the terminal, or send one message with ``-m``."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import sys
from collections.abc import Iterator

from bot.cli.common import (
    add_common,
    daemon_stopped,
    load,
    preload_litellm,
    quick_exit,
    setup_logging,
)
from bot.config import Config


def add_parser(sub) -> None:
    sp = add_common(sub.add_parser("chat", help="chat in the terminal"), log=True)
    sp.add_argument(
        "-m",
        "--message",
        metavar="TEXT",
        help="send one message, print the reply and exit (exit 1 when the model failed)",
    )
    sp.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    cfg = load(args)
    preload_litellm(cfg)
    interactive = args.message is None and sys.stdin.isatty() and sys.stdout.isatty()
    log_file = cfg.agent.state_dir / "chat.log"
    if interactive:  # logs never land in the conversation
        setup_logging(cfg, args.log_level or "INFO", file=log_file)
    elif args.message is not None and not args.log_level:
        # -m: the answer on stdout, a failure once on stderr; the details go to the log file
        setup_logging(cfg, "WARNING", file=log_file)
    else:
        setup_logging(cfg, args.log_level or "WARNING")
    rc = asyncio.run(_chat(cfg, args, interactive))
    daemon_stopped()
    return rc


async def _chat(cfg: Config, args: argparse.Namespace, interactive: bool) -> int:
    from bot.app.daemon import Daemon
    from channels.terminal import TerminalChannel, chat_loop, line_loop

    term = TerminalChannel()
    daemon = Daemon(cfg, channels={"terminal": term}, scheduler=False)
    await daemon.start()
    if daemon.mcp is not None and not interactive:  # one turn: its MCP tools must be there
        await daemon.mcp.settled()
    failures: list[str] = []
    _watch_turns(daemon, failures)

    async def cancelled(msg) -> None:
        assert daemon.lanes and daemon.conversation and daemon.store  # built by start()
        daemon.lanes.cancel(daemon.conversation.session_key(msg))
        await asyncio.sleep(0)
        # the cancelled message is not answered later either (it would be, after a restart)
        for row in daemon.store.inbound_with_status("pending", channel="terminal"):
            if row.payload.get("message_id") == msg.message_id:
                daemon.store.set_inbound_status(row.id, "cancelled")

    try:
        if args.message is not None:
            return await _one_message(term, args.message, failures, cfg)
        if not interactive:
            await line_loop(term, commands=_command_names())
            return 1 if failures else 0
        log_file = cfg.agent.state_dir / "chat.log"
        banner = (
            f"Chela chat ({cfg.agent.model}). /help for commands; Alt-Enter for a new line; "
            f"Ctrl-C cancels a reply, clears the line or quits on an empty one; Ctrl-D quits. "
            f"Logs: {log_file}"
        )
        with _shown(daemon, term, cfg):
            rc = await chat_loop(
                term,
                history=cfg.agent.state_dir / "chat_history",
                banner=banner,
                on_cancel=cancelled,
                commands=_command_names(),
            )
        await daemon.stop()
        # quit now: prompt_toolkit may still hold a worker thread reading the terminal
        quick_exit(rc)
    finally:
        await daemon.stop()


def _command_names() -> list[str]:
    from bot.conversation.commands import menu

    return [name for name, _ in menu()]


@contextlib.contextmanager
def _shown(daemon, term, cfg: Config) -> Iterator[None]:
    """The terminal shows each turn as it runs: a :class:`ChatView` fed the conversation's
    turn events for the chat's session, and the delivered replies."""
    from bot.cli.chat_render import ChatView

    def quiet() -> None:
        if term.thinking is not None:
            term.thinking.stop()

    def busy() -> None:
        if term.thinking is not None:
            term.thinking.start()

    view = ChatView(term.out, tty=True, secrets=cfg.secret_values(), quiet=quiet, busy=busy)
    hub = getattr(daemon.conversation, "events", None)
    if hub is None:  # a conversation without turn events: replies only
        term.view = view
        view.open = True
        yield
        return
    with hub.subscribe(daemon.conversation.session_key(term.message(""))) as sub:
        term.view = _Drained(view, sub)
        pump = asyncio.get_running_loop().create_task(_pump(sub, view))
        try:
            yield
        finally:
            pump.cancel()
            term.view = None


async def _pump(sub, view) -> None:
    async for ev in sub:
        view.feed(ev)


class _Drained:
    """The view as the channel sees it: a reply first takes the events still queued (the
    text streamed for it), so it replaces all of that text."""

    def __init__(self, view, sub) -> None:
        self.view = view
        self.sub = sub

    def reply(self, text: str) -> None:
        while (ev := self.sub.get_nowait()) is not None:
            self.view.feed(ev)
        self.view.reply(text)

    def end(self) -> None:
        self.view.end()


async def _one_message(term, text: str, failures: list[str], cfg: Config) -> int:
    """``chela chat -m``: the reply on stdout, or the failure once on stderr (the apology
    the chat would show is the same failure, so it is not printed as an answer)."""
    held = io.StringIO()
    term.out = held
    await term.ask(text)
    if failures:
        log_file = cfg.agent.state_dir / "chat.log"
        print(f"chela: the turn failed: {failures[-1]} (log: {log_file})", file=sys.stderr)
        return 1
    sys.stdout.write(held.getvalue())
    sys.stdout.flush()
    return 0


def _watch_turns(daemon, failures: list[str]) -> None:
    """Note every turn whose model call failed (the reply is then an apology, which the
    conversation delivers like any answer): ``chela chat -m`` exits non-zero on it."""
    run_turn = daemon.agent.run_turn

    async def watched(req, *a, **kw):
        try:
            result = await run_turn(req, *a, **kw)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            failures.append(f"{type(e).__name__}: {e}")
            raise
        if getattr(result, "error", None):
            failures.append(result.error)
        return result

    daemon.agent.run_turn = watched
