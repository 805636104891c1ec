"""The ``chela`` command line (SPEC §1)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import logging
import os
import sys
from pathlib import Path
from typing import NoReturn

from channels.redact import RedactSecrets, redacted_stdio
from bot.config.secrets import loaded
from bot.channel_specs import MESSAGING
from bot.config import ChannelPolicy, Config, ConfigError, config_warnings, load_config

# libraries whose INFO lines stay out of Chela's log
_CHATTY = "httpx httpcore LiteLLM litellm apscheduler discord telegram slack_bolt slack_sdk aiohttp.access"


def setup_logging(cfg: Config | None, level: str = "INFO", *, file: Path | None = None) -> None:
    """One line per event on stderr, or appended to ``file`` (0600) when given."""
    if file is not None:
        from bot.private import private_dir

        private_dir(file.parent)
        fd = os.open(file, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        handler: logging.Handler = logging.StreamHandler(os.fdopen(fd, "a", encoding="utf-8"))
    else:
        handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    if cfg is not None:
        handler.addFilter(RedactSecrets(cfg.secret_values()))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for noisy in _CHATTY.split():
        logging.getLogger(noisy).setLevel(logging.WARNING)


def _load(args) -> Config:
    try:
        return load_config(getattr(args, "config", None))
    except ConfigError as e:
        print(f"chela: {e}", file=sys.stderr)
        raise SystemExit(1) from None


# ------------------------------------------------------------------------------ commands
def cmd_run(args) -> int:
    from bot.agent import preload

    preload.start()  # litellm's ~2 s import overlaps reading the config and opening channels
    from bot.daemon import Daemon
    from bot.doctor import config_errors
    from bot.lock import LockHeld

    cfg = _load(args)
    setup_logging(cfg, args.log_level or "INFO")
    errors = config_errors(cfg)  # the same list that makes `chela check` exit 1
    if errors:
        for e in errors:
            print(f"chela: {e}", file=sys.stderr)
        return 1
    os.umask(0o077)  # whatever Chela or its commands create is private (SPEC §9.4)
    from bot.store import StoreError

    try:
        rc = asyncio.run(Daemon(cfg).run())
    except (ConfigError, StoreError, LockHeld) as e:  # named and explained; never a traceback
        print(f"chela: {e}", file=sys.stderr)
        return 1
    global _STOPPED_CLEANLY  # noqa: PLW0603 - read by entry() once main() returns
    _STOPPED_CLEANLY = True
    return rc


def cmd_chat(args) -> int:
    from bot.agent import preload

    preload.start()
    from bot.daemon import Daemon
    from channels.terminal import TerminalChannel, chat_loop, line_loop

    cfg = _load(args)
    interactive = args.message is None and sys.stdin.isatty() and sys.stdout.isatty()
    log_file = cfg.agent.state_dir / "chat.log"
    if interactive:  # logs never land in the conversation
        setup_logging(cfg, args.log_level or "INFO", file=log_file)
    else:
        setup_logging(cfg, args.log_level or "WARNING")

    async def main() -> int:
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

    rc = asyncio.run(main())
    global _STOPPED_CLEANLY  # noqa: PLW0603 - read by entry() once main() returns
    _STOPPED_CLEANLY = True
    return rc


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


def _prompt_context(args, cfg: Config):
    from bot.agent.turn import Agent, TurnRequest
    from bot.prompt.group import group_chat_context
    from bot.store import Store

    agent = Agent(cfg, Store(":memory:"))
    session = args.session or "main"
    chat_type = getattr(args, "chat_type", None) or ("direct" if args.channel else "")
    extra = ""
    group_name = getattr(args, "group_name", None) or ""
    if chat_type == "group":
        extra = group_chat_context(
            args.channel or "chat", group_name or "group", [], "mention", include_activation=False
        )
    if session == "subagent":
        from bot.prompt.group import subagent_context

        extra = subagent_context("sub-task")
    caps: tuple[str, ...] = ()
    reactions = "off"
    if args.channel:
        from bot.daemon import channel_class

        caps = tuple(channel_class(args.channel).capabilities.names())
        pol = getattr(cfg.channels, args.channel, None)
        reactions = pol.reactions if isinstance(pol, ChannelPolicy) else "off"
    req = TurnRequest(
        session_key="",
        user_text="",
        session_kind=session,
        channel=args.channel or "",
        chat_type=chat_type,
        group_title=group_name,
        group_id=group_name if chat_type == "group" else "",
        extra_context=extra,
        capabilities=caps,
        reactions=reactions,
    )
    ctx = agent.prompt_context(req)
    if getattr(args, "mode", None):
        ctx = dataclasses.replace(ctx, mode=args.mode)
    return agent, ctx


def _need_workspace(cfg: Config) -> None:
    if not cfg.agent.workspace.is_dir():
        print(
            f"chela: workspace {cfg.agent.workspace} does not exist; create it with `chela init`",
            file=sys.stderr,
        )
        raise SystemExit(1)


def cmd_prompt(args) -> int:
    cfg = _load(args)
    _need_workspace(cfg)
    agent, ctx = _prompt_context(args, cfg)
    result = agent.cache.get(ctx)
    if args.json:
        print(json.dumps(result.to_json(), ensure_ascii=False, indent=2))
    else:
        print(result.text)
    return 0


def cmd_context(args) -> int:
    from bot.prompt.report import context_report

    cfg = _load(args)
    _need_workspace(cfg)
    args.session, args.mode = "main", None
    agent, ctx = _prompt_context(args, cfg)
    print(context_report(agent.cache.get(ctx), ctx, args.kind))
    return 0


def cmd_init(args) -> int:
    from bot.prompt.init import init_workspace

    if args.write_examples:
        from bot.onboard import write_examples

        dest = Path(args.write_examples).expanduser()
        written = write_examples(dest)
        for p in written:
            print(f"wrote {p}")
        if not written:
            print(f"{dest}: the examples are already there (existing files are never overwritten)")
        if not args.workspace:
            return 0
    ws = Path(args.workspace).expanduser() if args.workspace else _load(args).agent.workspace
    created = init_workspace(ws)
    for p in created:
        print(f"created {p}")
    if not created:
        print(f"{ws}: nothing to do (existing files are never overwritten)")
    return 0


def cmd_check(args) -> int:
    from bot.daemon import enabled_channels
    from bot.doctor import config_errors, model_errors

    cfg = _load(args)
    where = cfg.source or "(no config file; defaults)"
    print(f"config: {where}: OK")
    print(
        f"workspace: {cfg.agent.workspace}"
        + ("" if cfg.agent.workspace.is_dir() else " (missing: run `chela init`)")
    )
    print(
        f"model: {cfg.agent.model}" + (f" via {cfg.agent.api_base}" if cfg.agent.api_base else "")
    )
    for i, f in enumerate(cfg.agent.fallbacks):
        print(f"fallback {i}: {f.model}" + (f" via {f.api_base}" if f.api_base else ""))
    from bot.channel_specs import CONFIGURED

    names = CONFIGURED
    needs = {name: list(cfg.channel_secrets(name).values()) for name in names}
    needs["http"] = [cfg.channels.http.token_env]  # optional; but once named, it must be set
    enabled = enabled_channels(cfg)
    for name in names:
        state = "enabled" if name in enabled else "disabled"
        secrets = ", ".join(
            f"{env} {'set' if cfg.secret(env) else 'MISSING'}" for env in needs[name] if env
        )
        print(f"channel {name}: {state}" + (f" ({secrets})" if secrets else ""))
    if cfg.channels.http.enabled:
        from bot.http_token import describe_http_token

        print(describe_http_token(cfg))
    if "exec" in cfg.tools.enabled or "exec" in cfg.tools.guest:
        ex = cfg.tools.exec
        if ex.sandbox == "on":
            from bot.agent.tools.sandbox import probe

            status = probe()
            if status.ok:
                print(
                    f"exec sandbox: {status.backend}: OK ({'network allowed' if ex.network else 'no network'})"
                )
            else:
                print(f"exec sandbox: NOT AVAILABLE: {status.detail}")
                print(f"warning: exec will refuse every command until this is fixed: {status.fix}")
        else:
            print("exec sandbox: off")
    for w in config_warnings(cfg):
        print(f"warning: {w}")
    errors = config_errors(cfg)  # `chela run` refuses on exactly these
    errors += model_errors(cfg)  # needs litellm: here, not on `chela run`'s start-up path
    for e in errors:
        print(f"error: {e}", file=sys.stderr)
    return 1 if errors else 0


def cmd_doctor(args) -> int:
    from bot.doctor import run_doctor

    cfg = _load(args)
    logging.getLogger().setLevel(logging.CRITICAL)  # findings only; litellm's own chatter stays out
    return run_doctor(cfg)


def cmd_usage(args) -> int:
    from bot.store import Store
    from bot.usage import usage_report, usage_table

    cfg = _load(args)
    if not cfg.db_path.exists():  # nothing recorded yet; do not create a database for that
        report = usage_report(cfg, Store(":memory:"), args.days)
    else:
        store = Store(cfg.db_path)
        try:
            report = usage_report(cfg, store, args.days)
        finally:
            store.close()
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(
            f"model calls since {report['since']} ({args.days} day{'s' if args.days != 1 else ''})"
        )
        print(usage_table(report))
    return 0


def cmd_status(args) -> int:
    from bot.status import status_text

    print(status_text(_load(args)))
    return 0


def cmd_onboard(args) -> int:
    from bot.onboard import run_onboard

    logging.getLogger().setLevel(logging.CRITICAL)
    return run_onboard(args)


def cmd_pairing(args) -> int:
    from bot import pairing
    from bot.store import Store

    cfg = _load(args)
    store = Store(cfg.db_path)
    try:
        if args.action == "list":
            from bot.status import table

            rows = store.pairing_requests()
            if not rows:
                print("no pending pairing requests")
                return 0
            print(
                table(
                    ["CHANNEL", "CODE", "SENDER ID", "NAME"],
                    [
                        [r["channel"], r["code"], r["sender_id"], r["sender_name"] or ""]
                        for r in rows
                    ],
                )
            )
            print("approve one with: chela pairing approve CHANNEL CODE")
            return 0
        if not args.channel or not args.code:
            print("usage: chela pairing approve CHANNEL CODE", file=sys.stderr)
            return 2
        try:
            sender = pairing.approve(store, args.channel, args.code)
        except pairing.PairingError as e:
            print(f"chela: {e}", file=sys.stderr)
            return 1
        print(
            f"approved {args.channel} sender {sender}: they can talk to the assistant now, as a guest. "
            "A running daemon tells them and answers the message that asked."
        )
        return 0
    finally:
        store.close()


def cmd_heartbeat(args) -> int:
    from bot.agent import preload

    preload.start()
    from bot.daemon import Daemon, build_channel

    cfg = _load(args)
    setup_logging(cfg, args.log_level or "INFO")

    async def main() -> int:
        from bot.heartbeat import resolve_target
        from bot.store import Store

        # start only the channel the heartbeat would deliver to
        probe = Store(cfg.db_path)
        route = resolve_target(probe, cfg, cfg.heartbeat.target, cfg.heartbeat.to)
        probe.close()
        channels = {}
        if route and not args.dry_run:
            channels[route["channel"]] = build_channel(cfg, route["channel"])
        # send-only: a running daemon keeps its updates and its stored messages
        daemon = Daemon(cfg, channels=channels, scheduler=False, receive=False)
        await daemon.start()
        if daemon.mcp is not None:  # the heartbeat's one turn gets the same tools as the daemon's
            await daemon.mcp.settled()
        try:
            assert daemon.scheduled is not None  # built by start()
            out = await daemon.scheduled.heartbeat(dry_run=args.dry_run)
        finally:
            await daemon.stop()
        print(out.describe())
        return 0 if out.status != "failed" else 1

    rc = asyncio.run(main())
    global _STOPPED_CLEANLY  # noqa: PLW0603 - read by entry() once main() returns
    _STOPPED_CLEANLY = True
    return rc


# --------------------------------------------------------------------------------- parser
CHANNEL_CHOICES = [*MESSAGING, "terminal", "http"]


def _version() -> str:
    from bot import __version__

    return f"chela {__version__}"


def _positive_int(value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {value!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected at least 1, got {n}")
    return n


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="chela",
        description="Self-hosted personal AI assistant daemon. "
        "New here? Run `chela onboard`, then `chela doctor`, then `chela chat`.",
    )
    p.add_argument(
        "--version", action="version", version=_version(), help="print the version and exit"
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def common(sp, log=False):
        sp.add_argument(
            "--config",
            metavar="PATH",
            help="config file (default: $CHELA_CONFIG, ./config.toml, ~/.chela/config.toml)",
        )
        if log:
            sp.add_argument(
                "--log-level",
                default=None,
                choices=["DEBUG", "INFO", "WARNING", "ERROR"],
                help="log verbosity (default: INFO for run; WARNING for chat -m; interactive "
                "chat logs to <state_dir>/chat.log)",
            )
        return sp

    sp = sub.add_parser(
        "onboard", help="set up: write config.toml and the workspace, check the model"
    )
    sp.add_argument(
        "--config",
        metavar="PATH",
        help="where to write the config (default: $CHELA_CONFIG, else ~/.chela/config.toml)",
    )
    sp.add_argument(
        "--non-interactive",
        action="store_true",
        help="ask nothing: take every answer from the flags",
    )
    sp.add_argument(
        "--force",
        action="store_true",
        help="with --non-interactive: replace an existing config file",
    )
    sp.add_argument(
        "--model", metavar="MODEL", help="litellm model string (default: openai/gpt-4o-mini)"
    )
    sp.add_argument(
        "--api-base",
        metavar="URL",
        help="a local OpenAI-compatible server, e.g. http://127.0.0.1:11434/v1",
    )
    sp.add_argument(
        "--api-key-env",
        metavar="VAR",
        help="environment variable holding the model's API key (default: the provider's usual one; "
        "none with --api-base)",
    )
    sp.add_argument(
        "--channel",
        action="append",
        metavar="NAME",
        help="enable a channel: telegram, discord, slack, signal or http (repeat, or comma separated)",
    )
    sp.add_argument(
        "--telegram-token-env",
        metavar="VAR",
        help="variable with the Telegram bot token (default TELEGRAM_BOT_TOKEN)",
    )
    sp.add_argument(
        "--telegram-api-base",
        metavar="URL",
        help="a self-hosted Telegram Bot API server (default https://api.telegram.org)",
    )
    sp.add_argument(
        "--discord-token-env",
        metavar="VAR",
        help="variable with the Discord bot token (default DISCORD_BOT_TOKEN)",
    )
    sp.add_argument(
        "--slack-bot-token-env",
        metavar="VAR",
        help="variable with the Slack xoxb- token (default SLACK_BOT_TOKEN)",
    )
    sp.add_argument(
        "--slack-app-token-env",
        metavar="VAR",
        help="variable with the Slack xapp- token (default SLACK_APP_TOKEN)",
    )
    sp.add_argument(
        "--signal-account", metavar="NUMBER", help="the bot's Signal number (needed for signal)"
    )
    sp.add_argument(
        "--signal-url",
        metavar="URL",
        help="signal-cli daemon --http address (default http://127.0.0.1:8080)",
    )
    sp.add_argument(
        "--owner",
        action="append",
        metavar="CHANNEL:ID",
        help="your own user id on a channel, e.g. telegram:123456789 (repeatable)",
    )
    sp.add_argument(
        "--workspace", metavar="DIR", help="workspace directory (default ~/.chela/workspace)"
    )
    sp.add_argument("--state-dir", metavar="DIR", help="state directory (default ~/.chela)")
    sp.add_argument("--timezone", metavar="ZONE", help="IANA time zone (default: this machine's)")
    sp.add_argument(
        "--skip-model-check", action="store_true", help="do not send the one-token test request"
    )
    sp.set_defaults(func=cmd_onboard)

    common(sub.add_parser("run", help="run the daemon"), log=True).set_defaults(func=cmd_run)
    sp = common(sub.add_parser("chat", help="chat in the terminal"), log=True)
    sp.add_argument(
        "-m",
        "--message",
        metavar="TEXT",
        help="send one message, print the reply and exit (exit 1 when the model failed)",
    )
    sp.set_defaults(func=cmd_chat)

    common(
        sub.add_parser(
            "doctor",
            help="check the config plus live checks: model, channel tokens, sandbox, "
            "permissions, HTTP port",
        )
    ).set_defaults(func=cmd_doctor)
    common(
        sub.add_parser(
            "status",
            help="the running daemon, its channels, sessions, next heartbeat and cron runs",
        )
    ).set_defaults(func=cmd_status)

    sp = common(
        sub.add_parser("usage", help="tokens and cost of the model calls, per day and model")
    )
    sp.add_argument(
        "--days",
        type=_positive_int,
        default=7,
        metavar="N",
        help="the last N days, today included (default 7)",
    )
    sp.add_argument("--json", action="store_true", help="print the report as JSON")
    sp.set_defaults(func=cmd_usage)

    sp = common(sub.add_parser("prompt", help="print the system prompt for a runtime context"))
    sp.add_argument("--channel", choices=CHANNEL_CHOICES, help="the channel the prompt is for")
    sp.add_argument("--chat-type", choices=["direct", "group"], help="direct message or group chat")
    sp.add_argument(
        "--session",
        choices=["main", "subagent", "cron", "heartbeat"],
        default="main",
        help="kind of session (default main)",
    )
    sp.add_argument(
        "--mode", choices=["full", "minimal", "none"], help="override agent.prompt_mode"
    )
    sp.add_argument("--group-name", metavar="NAME", help="group title, with --chat-type group")
    sp.add_argument(
        "--json", action="store_true", help="print the prompt and its size report as JSON"
    )
    sp.set_defaults(func=cmd_prompt)

    sp = common(sub.add_parser("context", help="size report of the system prompt"))
    sp.add_argument(
        "kind",
        nargs="?",
        default="list",
        choices=["list", "detail", "json"],
        help="list (default), detail or json",
    )
    sp.add_argument("--channel", choices=CHANNEL_CHOICES, help="the channel the prompt is for")
    sp.set_defaults(func=cmd_context)

    sp = common(sub.add_parser("init", help="create a workspace with starter files"))
    sp.add_argument(
        "--workspace", metavar="DIR", help="the workspace to create (default: agent.workspace)"
    )
    sp.add_argument(
        "--write-examples",
        metavar="DIR",
        help="also copy config.example.toml and the systemd units into DIR (never overwrites)",
    )
    sp.set_defaults(func=cmd_init)

    common(sub.add_parser("check", help="validate the config")).set_defaults(func=cmd_check)

    sp = common(sub.add_parser("pairing", help="DM pairing requests"))
    sp.add_argument(
        "action", choices=["list", "approve"], help="list pending requests, or approve one"
    )
    sp.add_argument("channel", nargs="?", help="with approve: the channel, e.g. telegram")
    sp.add_argument("code", nargs="?", help="with approve: the code the sender got")
    sp.set_defaults(func=cmd_pairing)

    sp = common(sub.add_parser("heartbeat", help="run one heartbeat now"), log=True)
    sp.add_argument(
        "--dry-run", action="store_true", help="print what would be sent without sending it"
    )
    sp.set_defaults(func=cmd_heartbeat)

    from bot.mcp.cli import add_parser as add_mcp_parser

    add_mcp_parser(sub, common)
    return p


# Set by the commands that run a daemon (run, chat, heartbeat) once it has stopped cleanly.
_STOPPED_CLEANLY = False


def quick_exit(rc: int) -> NoReturn:
    """End the process now, after flushing what is ours: the store is closed by
    ``Daemon.stop()``, the log handlers and stdio are flushed here.  Skipped is the interpreter's
    own teardown -- ~0.5 s of freeing litellm's modules -- and any join of worker threads."""
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(rc)


def entry() -> None:
    """The `chela` console script and `python -m bot`: :func:`main`, then a fast exit when a
    daemon has stopped (SPEC: after "stopped" the process is gone within 0.5 s)."""
    rc = main()
    if _STOPPED_CLEANLY:
        quick_exit(rc)
    raise SystemExit(rc)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        with redacted_stdio(loaded):  # the one output path: nothing printed shows a secret
            return args.func(args) or 0
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # the reader went away (`chela status | head -1`): stop quietly, and keep the
        # interpreter's final flush of stdout from failing again
        with contextlib.suppress(OSError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        return 141


if __name__ == "__main__":
    entry()
