"""``chela check``: validate the config and say what it enables, without touching the network."""

from __future__ import annotations

import argparse
import sys

from bot.cli.common import add_common, load
from bot.config import Config


def add_parser(sub) -> None:
    add_common(sub.add_parser("check", help="validate the config")).set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from bot.cli.validate import validate

    cfg = load(args)
    print(f"config: {cfg.source or '(no config file; defaults)'}")
    print(
        f"workspace: {cfg.agent.workspace}"
        + ("" if cfg.agent.workspace.is_dir() else " (missing: run `chela init`)")
    )
    print(
        f"model: {cfg.agent.model}" + (f" via {cfg.agent.api_base}" if cfg.agent.api_base else "")
    )
    for i, f in enumerate(cfg.agent.fallbacks):
        print(f"fallback {i}: {f.model}" + (f" via {f.api_base}" if f.api_base else ""))
    _print_channels(cfg)
    if cfg.channels.http.enabled:
        from bot.app.http_token import describe_http_token

        print(describe_http_token(cfg))
    if "exec" in cfg.tools.enabled or "exec" in cfg.tools.guest:
        _print_sandbox(cfg)
    verdict = validate(cfg)  # `chela run` refuses on exactly these errors
    for w in verdict.warnings:
        print(f"warning: {w}")
    for e in verdict.errors:
        print(f"error: {e}", file=sys.stderr)
    n = len(verdict.errors)
    print(f"config has {n} error(s); `chela run` refuses to start" if n else "config: OK")
    return 1 if n else 0


def _print_channels(cfg: Config) -> None:
    from bot.app.channels import CONFIGURED
    from bot.app.daemon import enabled_channels

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


def _print_sandbox(cfg: Config) -> None:
    ex = cfg.tools.exec
    if ex.sandbox != "on":
        print("exec sandbox: off")
        return
    from bot.agent.tools.sandbox import probe

    status = probe()
    if status.ok:
        print(
            f"exec sandbox: {status.backend}: OK ({'network allowed' if ex.network else 'no network'})"
        )
    else:
        print(f"exec sandbox: NOT AVAILABLE: {status.detail}")
        print(f"warning: exec will refuse every command until this is fixed: {status.fix}")
