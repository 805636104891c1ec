"""The source guards' shared parse: each product file is parsed and walked once per session,
however many guards read it (they were re-parsing the whole tree per test).

Keyed by the source text itself, so a file that changes is parsed again and a test's own
snippets go through the same walk as the tree."""

from __future__ import annotations

import ast
import functools
from pathlib import Path


@functools.cache
def walk(source: str) -> tuple[ast.AST, ...]:
    """Every node of ``source`` in ``ast.walk`` order (the nodes are shared: read, never
    change them)."""
    return tuple(ast.walk(ast.parse(source)))


def walk_file(path: Path) -> tuple[ast.AST, ...]:
    return walk(path.read_text(encoding="utf-8"))


ROOT = Path(__file__).resolve().parents[2]


def product_files() -> list[Path]:
    """Every module of the product (bot/ and channels/), in a stable order."""
    return [p for pkg in ("bot", "channels") for p in sorted((ROOT / pkg).rglob("*.py"))]


def dotted(node: ast.AST) -> str:
    """``a.b.c`` for a name or attribute chain, ``f().x`` through a call, "" otherwise."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = dotted(node.value)
        return f"{inner}.{node.attr}" if inner else node.attr
    if isinstance(node, ast.Call):
        return dotted(node.func) + "()"
    return ""
