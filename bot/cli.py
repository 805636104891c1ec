"""The ``chela`` command line (SPEC §1)."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import logging
import os
import sys
from pathlib import Path

from channels.redact import RedactSecrets
from bot.config import ChannelPolicy, Config, ConfigError, config_warnings, load_config


def setup_logging(cfg: Config | None, level: str = "INFO") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    if cfg is not None:
        handler.addFilter(RedactSecrets(cfg.secret_values()))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for noisy in ("httpx", "httpcore", "LiteLLM", "litellm", "apscheduler", "discord", "telegram", "slack_bolt",
                  "slack_sdk", "aiohttp.access"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def _load(args) -> Config:
    try:
        return load_config(getattr(args, "config", None))
    except ConfigError as e:
        print(f"chela: {e}", file=sys.stderr)
        raise SystemExit(1)


# ------------------------------------------------------------------------------ commands
def cmd_run(args) -> int:
    from bot.daemon import Daemon

    cfg = _load(args)
    setup_logging(cfg, args.log_level)
    os.umask(0o077)   # whatever Chela or its commands create is private (SPEC §9.4)
    from bot.store import StoreError

    try:
        return asyncio.run(Daemon(cfg).run())
    except (ConfigError, StoreError) as e:      # named and explained; never a traceback
        print(f"chela: {e}", file=sys.stderr)
        return 1


def cmd_chat(args) -> int:
    from bot.daemon import Daemon
    from channels.terminal import TerminalChannel

    cfg = _load(args)
    setup_logging(cfg, args.log_level)

    async def main() -> int:
        term = TerminalChannel()
        daemon = Daemon(cfg, channels={"terminal": term}, scheduler=False)
        await daemon.start()
        try:
            if args.message is not None:
                await term.ask(args.message)
                return 0
            print("Chela chat. /help for commands, Ctrl-D to quit.", file=sys.stderr)
            loop = asyncio.get_running_loop()
            while True:
                line = await loop.run_in_executor(None, _read_line)
                if line is None:
                    return 0
                if line.strip():
                    await term.ask(line.rstrip("\n"))
        finally:
            await daemon.stop()

    return asyncio.run(main())


def _read_line() -> str | None:
    try:
        return input("> ")
    except EOFError:
        return None


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
        extra = group_chat_context(args.channel or "chat", group_name or "group", [], "mention",
                                   include_activation=False)
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
    req = TurnRequest(session_key="", user_text="", session_kind=session, channel=args.channel or "",
                      chat_type=chat_type, group_title=group_name, group_id=group_name if chat_type == "group" else "",
                      extra_context=extra, capabilities=caps, reactions=reactions)
    ctx = agent.prompt_context(req)
    if getattr(args, "mode", None):
        ctx = dataclasses.replace(ctx, mode=args.mode)
    return agent, ctx


def _need_workspace(cfg: Config) -> None:
    if not cfg.agent.workspace.is_dir():
        print(f"chela: workspace {cfg.agent.workspace} does not exist; create it with `chela init`", file=sys.stderr)
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

    if args.workspace:
        ws = Path(args.workspace).expanduser()
    else:
        ws = _load(args).agent.workspace
    created = init_workspace(ws)
    for p in created:
        print(f"created {p}")
    if not created:
        print(f"{ws}: nothing to do (existing files are never overwritten)")
    return 0


def cmd_check(args) -> int:
    from bot.daemon import enabled_channels

    cfg = _load(args)
    where = cfg.source or "(no config file; defaults)"
    print(f"config: {where}: OK")
    print(f"workspace: {cfg.agent.workspace}" + ("" if cfg.agent.workspace.is_dir() else " (missing: run `chela init`)"))
    print(f"model: {cfg.agent.model}" + (f" via {cfg.agent.api_base}" if cfg.agent.api_base else ""))
    names = ("telegram", "discord", "slack", "signal", "http")
    needs = {name: list(cfg.channel_secrets(name).values()) for name in names}
    needs["http"] = [cfg.channels.http.token_env]        # optional; but once named, it must be set
    enabled = enabled_channels(cfg)
    missing = False
    for name in names:
        state = "enabled" if name in enabled else "disabled"
        secrets = ", ".join(f"{env} {'set' if cfg.secret(env) else 'MISSING'}" for env in needs[name] if env)
        print(f"channel {name}: {state}" + (f" ({secrets})" if secrets else ""))
        if name in enabled and any(env and not cfg.secret(env) for env in needs[name]):
            missing = True
    if cfg.channels.http.enabled:
        from bot.http_token import describe_http_token

        print(describe_http_token(cfg))
        if cfg.channels.http.token_env and not cfg.secret(cfg.channels.http.token_env).strip():
            missing = True
    if "exec" in cfg.tools.enabled or "exec" in cfg.tools.guest:
        ex = cfg.tools.exec
        if ex.sandbox == "on":
            from bot.agent.tools.sandbox import probe

            status = probe()
            if status.ok:
                print(f"exec sandbox: {status.backend}: OK ({'network allowed' if ex.network else 'no network'})")
            else:
                print(f"exec sandbox: NOT AVAILABLE: {status.detail}")
                print(f"warning: exec will refuse every command until this is fixed: {status.fix}")
        else:
            print("exec sandbox: off")
    for w in config_warnings(cfg):
        print(f"warning: {w}")
    if missing:
        print("error: an enabled channel is missing a secret (see above)", file=sys.stderr)
        return 1
    return 0


def cmd_pairing(args) -> int:
    from bot import pairing
    from bot.store import Store

    cfg = _load(args)
    store = Store(cfg.db_path)
    try:
        if args.action == "list":
            rows = store.pairing_requests()
            if not rows:
                print("no pending pairing requests")
            for r in rows:
                print(f"{r['channel']}\t{r['code']}\t{r['sender_id']}\t{r['sender_name']}")
            return 0
        if not args.channel or not args.code:
            print("usage: chela pairing approve CHANNEL CODE", file=sys.stderr)
            return 2
        try:
            sender = pairing.approve(store, args.channel, args.code)
        except pairing.PairingError as e:
            print(f"chela: {e}", file=sys.stderr)
            return 1
        print(f"approved {args.channel} sender {sender}: they can talk to the assistant now, as a guest. "
              "A running daemon tells them and answers the message that asked.")
        return 0
    finally:
        store.close()


def cmd_heartbeat(args) -> int:
    from bot.daemon import Daemon, build_channel

    cfg = _load(args)
    setup_logging(cfg, args.log_level)

    async def main() -> int:
        from bot.heartbeat import resolve_target
        from bot.store import Store

        # start only the channel the heartbeat would deliver to
        probe = Store(cfg.db_path)
        route = resolve_target(probe, cfg.heartbeat.target, cfg.heartbeat.to)
        probe.close()
        channels = {}
        if route and not args.dry_run:
            channels[route["channel"]] = build_channel(cfg, route["channel"])
        # send-only: a running daemon keeps its updates and its stored messages
        daemon = Daemon(cfg, channels=channels, scheduler=False, receive=False)
        await daemon.start()
        try:
            out = await daemon.scheduled.heartbeat(dry_run=args.dry_run)
        finally:
            await daemon.stop()
        print(out.describe())
        return 0 if out.status != "failed" else 1

    return asyncio.run(main())


# --------------------------------------------------------------------------------- parser
def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="chela", description="Self-hosted personal AI assistant daemon")
    sub = p.add_subparsers(dest="command", required=True)

    def common(sp, log=False):
        sp.add_argument("--config", help="config file (default: $CHELA_CONFIG, ./config.toml, ~/.chela/config.toml)")
        if log:
            sp.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
        return sp

    common(sub.add_parser("run", help="run the daemon"), log=True).set_defaults(func=cmd_run)
    sp = common(sub.add_parser("chat", help="chat in the terminal"), log=True)
    sp.add_argument("-m", "--message", help="send one message, print the reply and exit")
    sp.set_defaults(func=cmd_chat)

    sp = common(sub.add_parser("prompt", help="print the system prompt for a runtime context"))
    sp.add_argument("--channel", choices=["telegram", "discord", "slack", "signal", "terminal", "http"])
    sp.add_argument("--chat-type", choices=["direct", "group"])
    sp.add_argument("--session", choices=["main", "subagent", "cron", "heartbeat"], default="main")
    sp.add_argument("--mode", choices=["full", "minimal", "none"])
    sp.add_argument("--group-name")
    sp.add_argument("--json", action="store_true")
    sp.set_defaults(func=cmd_prompt)

    sp = common(sub.add_parser("context", help="size report of the system prompt"))
    sp.add_argument("kind", nargs="?", default="list", choices=["list", "detail", "json"])
    sp.add_argument("--channel", choices=["telegram", "discord", "slack", "signal", "terminal", "http"])
    sp.set_defaults(func=cmd_context)

    sp = common(sub.add_parser("init", help="create a workspace with starter files"))
    sp.add_argument("--workspace")
    sp.set_defaults(func=cmd_init)

    common(sub.add_parser("check", help="validate the config")).set_defaults(func=cmd_check)

    sp = common(sub.add_parser("pairing", help="DM pairing requests"))
    sp.add_argument("action", choices=["list", "approve"])
    sp.add_argument("channel", nargs="?")
    sp.add_argument("code", nargs="?")
    sp.set_defaults(func=cmd_pairing)

    sp = common(sub.add_parser("heartbeat", help="run one heartbeat now"), log=True)
    sp.add_argument("--dry-run", action="store_true")
    sp.set_defaults(func=cmd_heartbeat)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args) or 0
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
