"""/help: the command list, derived from the table (owner-only commands for the owner)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol


class Listed(Protocol):
    """What /help reads of a table row (``table.CommandSpec``)."""

    @property
    def name(self) -> str: ...
    @property
    def usage(self) -> str: ...
    @property
    def help(self) -> str: ...
    @property
    def owner_only(self) -> bool: ...
    @property
    def alias_of(self) -> str: ...


def help_text(specs: Iterable[Listed], owner: bool) -> str:
    """One line per command the sender may use; an alias is named on its command's line
    (``/new or /reset``)."""
    specs = list(specs)
    lines = ["Commands:"]
    for c in specs:
        if c.alias_of or (c.owner_only and not owner):
            continue
        usage = " or ".join([c.usage] + [a.usage for a in specs if a.alias_of == c.name])
        lines.append(f"{usage}: {c.help}" + (" (owner only)" if c.owner_only else ""))
    return "\n".join(lines)
