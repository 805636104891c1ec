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
from bot.config import Config, agent_config


def add_parser(sub) -> None:
    sp = add_common(sub.add_parser("chat", help="chat in the terminal"), log=True)
    sp.add_argument(
        "-m",
        "--message",
        metavar="TEXT",
        help="send one message, print the reply and exit (exit 1 when the model failed)",
    )
    sp.add_argument("--agent", metavar="ID", help="talk to this agent (default: the default agent)")
    sp.set_defaults(func=run)


def with_agent(cfg: Config, agent: str) -> Config:
    """``cfg`` in which the terminal is bound to ``agent``: the conversation routes the chat's
    messages to it as any binding does (the terminal's own bindings give way)."""
    from bot.config import Binding

    own = [b for b in cfg.bindings if b.channel != "terminal"]
    # the terminal is no messaging channel a config file may bind: built as a value
    terminal = Binding.model_construct(
        agent=agent, channel="terminal", account="", chat="", peer=""
    )
    return cfg.model_copy(update={"bindings": [*own, terminal]})


def run(args: argparse.Namespace) -> int:
    from bot.config import agent_ids

    cfg = load(args)
    if args.agent is not None:
        if args.agent not in agent_ids(cfg):
            known = ", ".join(agent_ids(cfg))
            print(f"chela chat: unknown agent {args.agent!r} (agents: {known})", file=sys.stderr)
            return 2
        cfg = with_agent(cfg, args.agent)
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
    """The chat: a client of the daemon running on this state dir (one scheduler, one
    outbox, one set of sessions), else its own core in this process."""
    from bot.cli.chat_client import find_daemon

    info, endpoint = await find_daemon(cfg)
    # the daemon's API answers as its default agent: another agent's chat runs here (the
    # jobs it adds are still the daemon's to run)
    if endpoint is not None and not getattr(args, "agent", None):
        return await _remote(cfg, args, interactive, endpoint)
    return await _local(cfg, args, interactive, info)


def _banner(cfg: Config, args: argparse.Namespace, where: str) -> str:
    log_file = cfg.agent.state_dir / "chat.log"
    agent = agent_config(cfg, getattr(args, "agent", None) or cfg.agent.id).agent
    return (
        f"Chela chat ({agent.id}, {agent.model}{where}). /help for commands; Alt-Enter for a "
        f"new line; Ctrl-C or /stop cancels a reply, Ctrl-C clears the line or quits on an "
        f"empty one; Ctrl-D quits. Logs: {log_file}"
    )


async def _remote(cfg: Config, args: argparse.Namespace, interactive: bool, endpoint) -> int:
    """Every turn runs in the running daemon, over its loopback HTTP API."""
    from bot.cli.chat_client import DaemonClient
    from channels.terminal import TerminalChannel, chat_loop, line_loop

    term = TerminalChannel()
    failures: list[str] = []
    client = DaemonClient(endpoint, term, failures)
    await term.start(client.sink)
    said = f"connected to the running daemon (pid {endpoint.pid})"
    try:
        if args.message is not None:
            return await _one_message(term, args.message, failures, cfg)
        if not interactive:
            print(f"chela: {said}", file=sys.stderr, flush=True)
            await line_loop(term)
            return 1 if failures else 0
        client.view = term.view = _view(term, cfg)
        rc = await chat_loop(
            term,
            history=cfg.agent.state_dir / "chat_history",
            banner=_banner(cfg, args, f"; {said}"),
            on_cancel=client.stop,
        )
        await client.close()
        quick_exit(rc)
    finally:
        await client.close()


async def _local(cfg: Config, args: argparse.Namespace, interactive: bool, info) -> int:
    """Turns run in this process; jobs it adds are stored for the daemon (never run here)."""
    from bot.app.daemon import Daemon
    from channels.terminal import TerminalChannel, chat_loop, line_loop

    term = TerminalChannel()
    daemon = Daemon(cfg, channels={"terminal": term}, scheduler=False)
    await daemon.start()
    if daemon.mcp is not None and not interactive:  # one turn: its MCP tools must be there
        await daemon.mcp.settled()
    failures: list[str] = []
    _watch_turns(daemon, failures, term.message(""))

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
            await line_loop(term)
            return 1 if failures else 0
        where = ""
        if info is not None:  # a daemon without its HTTP API: it runs the jobs added here
            where = (
                f"; the daemon (pid {info.get('pid')}) runs without its HTTP API, so this "
                "chat runs here and the daemon runs the jobs it adds"
            )
        with _shown(daemon, term, cfg):
            rc = await chat_loop(
                term,
                history=cfg.agent.state_dir / "chat_history",
                banner=_banner(cfg, args, where),
                on_cancel=cancelled,
            )
        await daemon.stop()
        # quit now: prompt_toolkit may still hold a worker thread reading the terminal
        quick_exit(rc)
    finally:
        await daemon.stop()


def _view(term, cfg: Config):
    """The chat's view on a terminal; writing to it hides the thinking indicator."""
    from bot.cli.chat_render import ChatView

    def quiet() -> None:
        if term.thinking is not None:
            term.thinking.stop()

    def busy() -> None:
        if term.thinking is not None:
            term.thinking.start()

    return ChatView(term.out, tty=True, secrets=cfg.secret_values(), quiet=quiet, busy=busy)


@contextlib.contextmanager
def _shown(daemon, term, cfg: Config) -> Iterator[None]:
    """The terminal shows each turn as it runs: a :class:`ChatView` fed the conversation's
    turn events for the chat's session, and the delivered replies."""
    view = _view(term, cfg)
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


def _watch_turns(daemon, failures: list[str], probe) -> None:
    """Note every turn whose model call failed (the reply is then an apology, which the
    conversation delivers like any answer): ``chela chat -m`` exits non-zero on it.  The
    agent watched is the one the chat's messages go to (``probe``: one of them)."""
    chatting = daemon.agents[daemon.conversation.choose_agent(probe) or daemon.cfg.agent.id]
    chatting.run_turn = _watched(chatting.run_turn, failures)


def _watched(run_turn, failures: list[str]):
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

    return watched
