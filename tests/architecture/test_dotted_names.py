"""Every dotted name of ours that the code's docstrings and comments mention exists.

A sentence such as "the preview comes from ``bot.delivery.previews``" is a pointer the next
engineer follows; after a move it must follow too.  Each ``bot.…`` / ``channels.…`` name is
resolved the way a reader would: the longest prefix that is a module, then attributes on it."""

from __future__ import annotations

import importlib
import importlib.util
import io
import re
import tokenize
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


def config_key(dotted: str) -> bool:
    """``channels.http.listen``: a TOML key of a channel's section, not a module path."""
    from bot.config.channels import ChannelsConfig

    parts = dotted.split(".")
    if len(parts) != 3 or parts[0] != "channels" or parts[1] not in ChannelsConfig.model_fields:
        return False
    section = ChannelsConfig.model_fields[parts[1]].annotation
    return parts[2] in getattr(section, "model_fields", {})


def prose(source: str) -> str:
    """The comments and string literals of ``source`` (docstrings included), not its code:
    a local variable named ``bot`` or ``channels`` is not a module."""
    kept = [
        tok.string
        for tok in tokenize.generate_tokens(io.StringIO(source).readline)
        if tok.type in (tokenize.COMMENT, tokenize.STRING)
    ]
    return "\n".join(kept)


def mentions(text: str) -> set[str]:
    return {m.rstrip(".") for m in NAME.findall(text)}


def sdk_object(rel: str, dotted: str) -> bool:
    """In a channel package, ``bot.username`` is the platform SDK's bot object."""
    parts = dotted.split(".")
    return rel.startswith("channels/") and len(parts) == 2 and parts[1].islower()


def test_every_mentioned_name_exists():
    missing = []
    for path in sorted(
        [*ROOT.joinpath("bot").rglob("*.py"), *ROOT.joinpath("channels").rglob("*.py")]
    ):
        rel = path.relative_to(ROOT).as_posix()
        for name in sorted(mentions(prose(path.read_text(encoding="utf-8")))):
            if not (resolves(name) or config_key(name) or sdk_object(rel, name)):
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
    assert config_key("channels.http.listen") and not config_key("channels.http.nothing")
    assert mentions(prose("bot.id = 1  # see bot.nowhere.Thing\n")) == {"bot.nowhere.Thing"}
