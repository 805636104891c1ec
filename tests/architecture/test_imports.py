"""The house's import rules (ARCHITECTURE.md "Rules"), checked from the source text.

Every import counts: at module level, inside functions, under ``TYPE_CHECKING``.  The layer
contracts themselves are `lint-imports` (.importlinter, a CI gate); this file holds the ratchet
on import cycles, which import-linter does not check across a whole tree.
"""

from __future__ import annotations

import ast
from pathlib import Path
from tests.architecture import tree

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("bot", "channels")

# Modules that sit in an import cycle today. The list may only shrink: a move that breaks a
# cycle removes its modules here; a module that joins a cycle fails the test.
KNOWN_IN_CYCLES: frozenset[str] = frozenset()


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def product_modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            if "data" not in path.relative_to(ROOT).parts:
                found[module_name(path)] = path
    return found


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The product module an import of ``name`` loads last (``bot.a.b`` → ``bot.a.b`` or
    ``bot.a``)."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def _imported(mod: str, path: Path, modules: dict[str, Path]) -> set[str]:
    is_pkg = path.name == "__init__.py"
    base = mod if is_pkg else mod.rpartition(".")[0]
    out: set[str] = set()
    for node in tree.walk_file(path):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = base.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                stem = ".".join([*anchor, node.module] if node.module else anchor)
            else:
                stem = node.module or ""
            names = [f"{stem}.{a.name}" for a in node.names] or [stem]
        for name in names:
            target = _resolve(name, modules)
            if target and target != mod:
                out.add(target)
    return out


def import_graph() -> dict[str, set[str]]:
    modules = product_modules()
    return {mod: _imported(mod, path, modules) for mod, path in modules.items()}


def cycles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp: set[str] = set()
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    comp.add(top)
                    if top == node:
                        break
                if len(comp) > 1:
                    found.append(comp)
    return found


def test_the_cycle_finder_finds_a_cycle_through_a_function_level_import():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [{"a", "b", "c"}]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_imports_inside_functions_and_type_checking_count(tmp_path):
    modules = {"bot.x": tmp_path / "x.py", "bot.y": tmp_path / "y.py"}
    modules["bot.x"].write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from bot.y import Y\n"
        "def f():\n    import bot.y\n"
    )
    assert _imported("bot.x", modules["bot.x"], modules) == {"bot.y"}


def test_no_new_import_cycle_among_product_modules():
    in_cycles = set().union(*cycles(import_graph()))
    new = sorted(in_cycles - KNOWN_IN_CYCLES)
    assert not new, f"modules newly in an import cycle: {new}"
    gone = sorted(KNOWN_IN_CYCLES - in_cycles)
    assert not gone, f"no longer in a cycle, remove from KNOWN_IN_CYCLES: {gone}"
