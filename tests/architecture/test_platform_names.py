"""The core names no platform: what differs per chat platform (its adapter, secrets, onboarding
questions, doctor probe) is in its row of the registry ``bot/app/channels.py`` (with the probes
it names, ``bot/app/probes.py``) beside its config section (``bot/config/channels.py``), so no
other module under bot/ spells a platform's name.  The platforms are the registry's messaging
channels, so a channel added there is held to this too.

Ratchet: KNOWN lists the modules that still spell one, with how many times; it may only
shrink (a module that stops spelling names leaves it, and a count may only go down)."""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path
from bot.app.channels import MESSAGING
from tests.architecture import tree

ROOT = Path(__file__).resolve().parents[2]
PLATFORMS = frozenset(MESSAGING)  # every chat platform of the registry
# the registry, its probes, and the config member of each channel (its section's schema)
REGISTRY = {"bot/app/channels.py", "bot/app/probes.py", "bot/config/channels.py"}

# module -> platform names it spells as string constants.  MAY ONLY SHRINK.
# (empty: the prompt's formatting hints and after-user note, the group labels and the owner
# route's direct-chat form are class attributes of each platform's config section)
KNOWN: dict[str, int] = {}


def spellings(source: str) -> int:
    """String constants in ``source`` that are exactly a platform's name (any case), dict
    keys and comparisons included; docstrings and longer strings do not count."""
    return sum(
        1
        for node in tree.walk(source)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and node.value.strip().lower() in PLATFORMS
    )


def test_only_the_registry_names_platforms():
    found = Counter()
    for path in sorted((ROOT / "bot").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel not in REGISTRY and (n := spellings(path.read_text(encoding="utf-8"))):
            found[rel] = n
    assert dict(found) == KNOWN


def test_the_platforms_are_the_registrys_chat_channels():
    assert {"telegram", "signal"} <= PLATFORMS and "http" not in PLATFORMS


def test_spellings_are_seen():
    src = 'x = {"telegram": 1}\nif name == "Signal": pass\ny = "telegram bot"\n'
    assert spellings(src) == 2
