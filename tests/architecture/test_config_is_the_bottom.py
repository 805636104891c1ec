"""The bottom knows nothing (ARCHITECTURE.md rule 2): no module under bot/config imports
anything of ``bot`` outside ``bot.config``, counting imports inside functions and under
``TYPE_CHECKING`` (the walker of test_imports.py reads them all from the source)."""

from __future__ import annotations

from tests.architecture.test_imports import _imported, import_graph

PACKAGE = "bot.config"


def _inside(mod: str) -> bool:
    return mod == PACKAGE or mod.startswith(PACKAGE + ".")


def imports_from_above(graph: dict[str, set[str]]) -> dict[str, list[str]]:
    """``{module under bot.config: the bot modules outside it that it imports}``."""
    out: dict[str, list[str]] = {}
    for mod, targets in graph.items():
        if not _inside(mod):
            continue
        above = sorted(t for t in targets if t.split(".")[0] == "bot" and not _inside(t))
        if above:
            out[mod] = above
    return out


def test_a_function_level_import_of_bot_from_config_is_caught(tmp_path):
    modules = {
        "bot.config.x": tmp_path / "x.py",
        "bot.config.y": tmp_path / "y.py",
        "bot.conversation": tmp_path / "router.py",
        "bot.store": tmp_path / "store.py",
        "channels.util": tmp_path / "util.py",
    }
    modules["bot.config.x"].write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from bot.store import Store\n"
        "from . import y\n"
        "import channels.util\n"
        "def f():\n    from bot.conversation import COMMANDS\n"
    )
    graph = {"bot.config.x": _imported("bot.config.x", modules["bot.config.x"], modules)}
    assert imports_from_above(graph) == {"bot.config.x": ["bot.conversation", "bot.store"]}
    # the package's own modules and channels/ (L0) are below it: allowed
    assert imports_from_above({"bot.config.x": {"bot.config.y", "channels.util"}}) == {}


def test_config_is_the_bottom():
    graph = import_graph()
    assert any(_inside(m) for m in graph), "bot/config is not where the walker looks"
    assert imports_from_above(graph) == {}, "bot/config imports bot/ modules above it"
