"""What the subcommands share: the ``--config``/``--log-level`` options, loading the config,
logging set-up, and the fast exit once a daemon has stopped."""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
from logging.handlers import RotatingFileHandler
import sys
from pathlib import Path
from typing import NoReturn

from channels.redact import RedactSecrets
from bot.app.channels import SPECS
from bot.config import Config, ConfigError, load_config

# libraries whose INFO lines stay out of Chela's log (each channel's SDK: its registry row)
_CHATTY = ("httpx", "httpcore", "LiteLLM", "litellm", "apscheduler", "aiohttp.access")


def add_common(sp: argparse.ArgumentParser, log: bool = False) -> argparse.ArgumentParser:
    """``--config`` for every subcommand; ``--log-level`` for those that run a daemon."""
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


def positive_int(value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {value!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected at least 1, got {n}")
    return n


def load(args: argparse.Namespace) -> Config:
    """The config ``--config`` names (or the default one); a broken one ends the command with
    its error on stderr and exit status 1."""
    try:
        return load_config(getattr(args, "config", None))
    except ConfigError as e:
        print(f"chela: {e}", file=sys.stderr)
        raise SystemExit(1) from None


def need_workspace(cfg: Config) -> None:
    if not cfg.agent.workspace.is_dir():
        print(
            f"chela: workspace {cfg.agent.workspace} does not exist; create it with `chela init`",
            file=sys.stderr,
        )
        raise SystemExit(1)


def setup_logging(cfg: Config | None, level: str = "INFO", *, file: Path | None = None) -> None:
    """One line per event on stderr, or appended to ``file`` (0600) when given."""
    if file is not None:
        from bot.fs import private_dir

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
    for noisy in (*_CHATTY, *(name for spec in SPECS.values() for name in spec.loggers)):
        logging.getLogger(noisy).setLevel(logging.WARNING)


LOG_MAX_BYTES = 5 * 1024 * 1024
LOG_BACKUPS = 3


def log_file(cfg: Config) -> Path:
    """Where ``chela run`` keeps its log (``chela logs`` reads it)."""
    return cfg.agent.state_dir / "logs" / "chela.log"


def add_log_file(cfg: Config) -> Path:
    """Also write the log to :func:`log_file` (0600), rotated at 5 MB, 3 old files kept."""
    from bot.fs import private_dir, private_file

    path = log_file(cfg)
    private_dir(path.parent)
    handler = RotatingFileHandler(
        path, maxBytes=LOG_MAX_BYTES, backupCount=LOG_BACKUPS, encoding="utf-8"
    )
    # 0600 before the first line (the directory is 0700 too, which also covers a rotated file)
    private_file(path)
    root = logging.getLogger()
    first = root.handlers[0] if root.handlers else None
    if first is not None:
        handler.setFormatter(first.formatter)
        for f in first.filters:
            handler.addFilter(f)
    root.addHandler(handler)
    return path


# Set by the commands that run a daemon (run, chat, heartbeat) once it has stopped cleanly.
_STOPPED_CLEANLY = False


def daemon_stopped() -> None:
    """Say that this process's daemon has stopped cleanly: ``entry()`` then exits fast."""
    global _STOPPED_CLEANLY  # noqa: PLW0603 - read by entry() once main() returns
    _STOPPED_CLEANLY = True


def stopped_cleanly() -> bool:
    return _STOPPED_CLEANLY


def quick_exit(rc: int) -> NoReturn:
    """End the process now, after flushing what is ours: the store is closed by
    ``Daemon.stop()``, the log handlers and stdio are flushed here.  Skipped is the interpreter's
    own teardown -- ~0.5 s of freeing litellm's modules -- and any join of worker threads."""
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(rc)


def preload_litellm(cfg: Config) -> None:
    """Begin litellm's import (~2 s, ~160 MB) now, to overlap the daemon's start-up, when a
    configured model needs it; a config whose models all take the light Chat Completions
    path never imports it."""
    from bot.model import litellm_path
    from bot.model import litellm_needed

    if litellm_needed(cfg):
        litellm_path.start()
