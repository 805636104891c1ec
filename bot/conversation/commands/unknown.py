"""A ``/word`` that is no command: answered by the core on every channel, never sent to the
model.  The answer names the closest command and lists the ones the sender may use.  In a
group only a ``/word`` addressed to this bot (``/word@thisbot``, or a mention) is answered;
another is ordinary text there."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from typing import Protocol

UNKNOWN = "?unknown"  # the call name of a /word that is no command (never typed: has "?")

# "/name" or "/name@bot" then arguments; "/etc/hosts ..." is text, not a command
_WORD = re.compile(r"/([A-Za-z][\w-]*)(?:@\S*)?(?:\s.*)?", re.DOTALL)


class Listed(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def owner_only(self) -> bool: ...


def unknown_word(text: str, known: Iterable[str]) -> str | None:
    """The word of a ``/word`` that is not in ``known``, or None (a command, or text)."""
    m = _WORD.fullmatch((text or "").strip())
    if m is None:
        return None
    word = m.group(1).lower()
    return None if word in known else word


def unknown_answer(word: str, specs: Iterable[Listed], owner: bool) -> str:
    """ "Unknown command /stauts. Did you mean /status?" and the commands the sender may use."""
    names = [c.name for c in specs if owner or not c.owner_only]
    close = difflib.get_close_matches(word, names, n=1)
    hint = f" Did you mean /{close[0]}?" if close else ""
    return f"Unknown command /{word}.{hint}\nCommands: " + " ".join(f"/{n}" for n in names)
