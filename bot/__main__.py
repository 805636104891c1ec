"""``python -m bot`` and the ``chela`` console script (pyproject.toml: ``bot.__main__:entry``).

Nothing heavy is imported here, so ``chela run`` takes SIGTERM as a stop (exit 0) from its
first moment: before the config's models and the channel libraries have finished importing,
which is most of a start.  The daemon's event loop installs its own handlers once it runs."""

from __future__ import annotations

import gc
import os
import signal
import sys


def _stop_while_starting(signum: int, frame: object) -> None:
    """SIGTERM before the daemon's loop handles it: unwind and exit 0, as a later stop does."""
    raise SystemExit(0)


def entry() -> None:
    if sys.argv[1:2] == ["run"]:
        signal.signal(signal.SIGTERM, _stop_while_starting)
        # no cyclic collection while start-up imports what lives as long as the daemon: it
        # is switched on, with those objects frozen, once the daemon is ready (bot/app/heap.py)
        gc.disable()
    from bot.cli import entry as command_line

    try:
        try:
            command_line()
        finally:
            sys.stdout.flush()  # here, where a closed pipe can be caught, not at exit
    except BrokenPipeError:
        # the reader went away (`chela --help | head -1`): the Python docs' recipe (the
        # "Note on SIGPIPE" of the signal module): stdout to devnull, so the interpreter's
        # last flush does not fail again, and a quiet exit
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        sys.exit(141)  # 128 + SIGPIPE, as bot.cli.main says for a pipe closed earlier


if __name__ == "__main__":
    entry()
