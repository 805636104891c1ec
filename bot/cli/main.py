"""The ``chela`` command line: the parser built from one module per subcommand,
the global options, and the one output path (:func:`main`)."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys
from collections.abc import Sequence

from channels.redact import redacted_stdio
from bot.cli.common import quick_exit, stopped_cleanly
from bot.config.channels import MESSAGING, platform
from bot.config.env_values import loaded

# the channels with a subcommand of their own (`chela whatsapp`): their registry rows say so
CHANNEL_COMMANDS = tuple(n for n in MESSAGING if (p := platform(n)) is not None and p.COMMAND)
# the subcommands, in the order `chela --help` lists them: each is the module bot.cli.<name>,
# with add_parser(sub) and run(args), imported only when the parser needs it
NAMES = (
    "onboard",
    "run",
    "chat",
    "doctor",
    "status",
    "logs",
    "usage",
    "sessions",
    "prompt",
    "context",
    "init",
    "check",
    "pairing",
    "hooks",
    "heartbeat",
    "backup",
    "restore",
    "mcp",
    "memory",
    "browser",
    *CHANNEL_COMMANDS,
    "dashboard",
    "completion",
)


def _version() -> str:
    from bot import __version__

    return f"chela {__version__}"


def command_named(argv: Sequence[str]) -> str | None:
    """The subcommand ``argv`` runs, when it can be told without the parser (the first word
    after the global options); None for ``--help``, ``--version``, ``completion`` or anything
    unclear (the whole parser is built then)."""
    words = iter(argv)
    for word in words:
        if word == "--config":
            next(words, None)
        elif word.startswith("--config="):
            continue
        elif word.startswith("-"):
            return None
        else:
            # `chela completion` reads the whole tree (args.parser)
            return word if word in NAMES and word != "completion" else None
    return None


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole command line; with ``only``, that subcommand alone (``main`` parses a
    command's arguments without importing every other command's module)."""
    p = argparse.ArgumentParser(
        prog="chela",
        description="Self-hosted personal AI assistant daemon. "
        "New here? Run `chela onboard`, then `chela doctor`, then `chela chat`.",
    )
    p.add_argument(
        "--version",
        action="version",
        version=_version(),
        help="print the version and exit",
    )
    p.add_argument(  # also accepted after the subcommand (`chela check --config my.toml`)
        "--config",
        metavar="PATH",
        default=None,
        help="config file (default: $CHELA_CONFIG, ./config.toml, ~/.chela/config.toml)",
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in NAMES if only is None else (only,):
        importlib.import_module(f"bot.cli.{name}").add_parser(sub)
    _describe(sub)
    p.set_defaults(parser=p)  # `chela completion` reads the whole tree from here
    return p


def _describe(sub) -> None:
    """Each subcommand's ``--help`` opens with what the command does (its line in
    ``chela --help``), and its ``--config`` leaves a global one given before it alone."""
    said = {a.dest: a.help for a in sub._choices_actions}
    for name, sp in sub.choices.items():
        if sp.description is None and said.get(name):
            sp.description = said[name][0].upper() + said[name][1:] + "."
        for action in sp._actions:
            if action.dest == "config":
                action.default = argparse.SUPPRESS


def entry() -> None:
    """The `chela` console script and `python -m bot`: :func:`main`, then a fast exit when a
    daemon has stopped (after "stopped" the process is gone within 0.5 s)."""
    try:
        try:
            rc = main()
        finally:
            sys.stdout.flush()  # here, where a closed pipe can be caught, not at exit
    except BrokenPipeError:  # `chela --help | head -1` without PYTHONUNBUFFERED
        rc = reader_gone()
    if stopped_cleanly():
        quick_exit(rc)
    raise SystemExit(rc)


def reader_gone() -> int:
    """The reader of stdout went away: the Python docs' recipe (the signal module's note on
    SIGPIPE): stdout to /dev/null, so the interpreter's last flush does not fail again, and
    a quiet exit status of 141 (128 + SIGPIPE), not Python's 120 with a traceback."""
    with contextlib.suppress(OSError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    return 141


def main(argv: list[str] | None = None) -> int:
    try:
        words = sys.argv[1:] if argv is None else argv
        # --help into a closed pipe is handled below
        args = build_parser(command_named(words)).parse_args(words)
        with redacted_stdio(loaded):  # the one output path: nothing printed shows a secret
            return args.func(args) or 0
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # the reader went away (`chela status | head -1`)
        return reader_gone()


if __name__ == "__main__":
    entry()
