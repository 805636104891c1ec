"""``chela chat``: talk to the assistant in the terminal, or send one message with ``-m``."""

from __future__ import annotations

import argparse
import asyncio
import sys

from bot.cli.common import add_common, daemon_stopped, load, quick_exit, setup_logging
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
    from bot.agent import preload

    preload.start()
    cfg = load(args)
    interactive = args.message is None and sys.stdin.isatty() and sys.stdout.isatty()
    log_file = cfg.agent.state_dir / "chat.log"
    if interactive:  # logs never land in the conversation
        setup_logging(cfg, args.log_level or "INFO", file=log_file)
    else:
        setup_logging(cfg, args.log_level or "WARNING")
    rc = asyncio.run(_chat(cfg, args, interactive))
    daemon_stopped()
    return rc


async def _chat(cfg: Config, args: argparse.Namespace, interactive: bool) -> int:
    from bot.daemon import Daemon
    from channels.terminal import TerminalChannel, chat_loop, line_loop

    term = TerminalChannel()
    daemon = Daemon(cfg, channels={"terminal": term}, scheduler=False)
    await daemon.start()
    if daemon.mcp is not None and not interactive:  # one turn: its MCP tools must be there
        await daemon.mcp.settled()
    failures: list[str] = []
    _watch_turns(daemon, failures)

    async def cancelled(msg) -> None:
        assert daemon.lanes and daemon.router and daemon.store  # built by start()
        daemon.lanes.cancel(daemon.router.session_key(msg))
        await asyncio.sleep(0)
        # the cancelled message is not answered later either (it would be, after a restart)
        for row in daemon.store.inbound_with_status("pending", channel="terminal"):
            if row.payload.get("message_id") == msg.message_id:
                daemon.store.set_inbound_status(row.id, "cancelled")

    try:
        if args.message is not None:
            await term.ask(args.message)
            if failures:
                print(f"chela: the turn failed: {failures[-1]}", file=sys.stderr)
                return 1
            return 0
        if not interactive:
            await line_loop(term)
            return 1 if failures else 0
        log_file = cfg.agent.state_dir / "chat.log"
        banner = (
            f"Chela chat ({cfg.agent.model}). /help for commands; Ctrl-C cancels a reply "
            f"or quits at the prompt; Ctrl-D quits. Logs: {log_file}"
        )
        rc = await chat_loop(
            term,
            history=cfg.agent.state_dir / "chat_history",
            banner=banner,
            on_cancel=cancelled,
        )
        await daemon.stop()
        # quit now: prompt_toolkit may still hold a worker thread reading the terminal
        quick_exit(rc)
    finally:
        await daemon.stop()


def _watch_turns(daemon, failures: list[str]) -> None:
    """Note every turn whose model call failed (the reply is then an apology, which the
    router delivers like any answer): ``chela chat -m`` exits non-zero on it."""
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
