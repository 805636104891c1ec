"""The ``chela`` command line: one module per subcommand (``add_parser(sub)`` and
``run(args)``), what they share in :mod:`bot.cli.common`, the parser and the entry point in
:mod:`bot.cli.main`.  ``chela`` and ``python -m bot`` come here through
:mod:`bot.__main__`, which takes SIGTERM as a stop before this package's imports."""

from __future__ import annotations

from bot.cli.main import entry, main

__all__ = ["entry", "main"]
