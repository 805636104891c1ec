"""Every dotted name of ours that the code's docstrings and comments mention exists.

A sentence such as "the preview comes from ``bot.delivery.previews``" is a pointer the next
engineer follows; after a move it must follow too.  Each ``bot.…`` / ``channels.…`` name is
resolved the way a reader would: the longest prefix that is a module, then attributes on it."""

from __future__ import annotations

import importlib
import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NAME = re.compile(r"(?<![\w./-])((?:bot|channels)(?:\.[A-Za-z_]\w*)+)")


def resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        module = ".".join(parts[:cut])
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            continue
        obj: object = importlib.import_module(module)
        for attr in parts[cut:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def mentions(text: str) -> set[str]:
    return {m.rstrip(".") for m in NAME.findall(text)}


def test_every_mentioned_name_exists():
    missing = []
    for path in sorted([*ROOT.joinpath("bot").rglob("*.py"), *ROOT.joinpath("channels").rglob("*.py")]):
        rel = path.relative_to(ROOT).as_posix()
        for name in sorted(mentions(path.read_text(encoding="utf-8"))):
            if not resolves(name):
                missing.append(f"{rel}: {name}")
    assert missing == []


def test_a_stale_name_is_caught_and_a_real_one_passes():
    assert mentions("see ``bot.streaming.StreamEvent`` and bot.fs.write_private.") == {
        "bot.streaming.StreamEvent",
        "bot.fs.write_private",
    }
    assert not resolves("bot.streaming.StreamEvent")
    assert resolves("bot.fs.write_private")
    assert resolves("channels.base.InboundMessage")
