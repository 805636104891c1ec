"""``chela browser reset``: forget the browser tool's profiles (cookies, logins, storage)."""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from bot.cli.common import add_common, load


def add_parser(sub) -> None:
    sp = sub.add_parser("browser", help="the browser tool's profiles")
    bsub = sp.add_subparsers(dest="browser_cmd", required=True, help="what to do")
    reset = add_common(
        bsub.add_parser("reset", help="delete the browser profiles (cookies, logins)")
    )
    reset.add_argument(
        "--agent", default="", help="only this agent's profile (default: every agent)"
    )
    reset.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from bot.app.lock import running_daemon

    cfg = load(args)
    state = Path(cfg.agent.state_dir).expanduser()
    daemon = running_daemon(state)
    if daemon is not None:
        print(
            f"chela: the daemon is running (pid {daemon.get('pid')}); stop it before "
            "resetting the browser",
            file=sys.stderr,
        )
        return 1
    root = state / "browser"
    pattern = f"profile-{args.agent}" if args.agent else "profile-*"
    removed = []
    for profile in sorted(root.glob(pattern)) if root.is_dir() else []:
        if profile.is_symlink() or not profile.is_dir():
            continue
        shutil.rmtree(profile)
        removed.append(profile.name.removeprefix("profile-"))
    if not removed:
        print("No browser profile to reset.")
    else:
        print(f"Reset the browser profile of: {', '.join(removed)}")
    return 0
