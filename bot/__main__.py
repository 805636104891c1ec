"""``python -m bot`` and the ``chela`` console script (pyproject.toml: ``bot.__main__:entry``).

Nothing heavy is imported here, so ``chela run`` takes SIGTERM as a stop (exit 0) from its
first moment: before the config's models and the channel libraries have finished importing,
which is most of a start.  The daemon's event loop installs its own handlers once it runs."""

from __future__ import annotations

import signal
import sys


def _stop_while_starting(signum: int, frame: object) -> None:
    """SIGTERM before the daemon's loop handles it: unwind and exit 0, as a later stop does."""
    raise SystemExit(0)


def entry() -> None:
    if sys.argv[1:2] == ["run"]:
        signal.signal(signal.SIGTERM, _stop_while_starting)
    from bot.cli import entry as command_line

    command_line()  # a closed stdout pipe is handled there (bot.cli.main.reader_gone)


if __name__ == "__main__":
    entry()
