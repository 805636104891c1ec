"""Moved to ``bot.fs`` (private dirs and files, atomic writes, pruning, guest roots);
these names stay importable from here for older callers."""

from bot.fs import (
    DIR_MODE,
    FILE_MODE,
    private_dir,
    private_file,
    prune_older_than,
    write_at,
    write_private,
)

__all__ = [
    "DIR_MODE",
    "FILE_MODE",
    "private_dir",
    "private_file",
    "prune_older_than",
    "write_at",
    "write_private",
]
