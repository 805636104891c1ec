"""Small rooms (ARCHITECTURE.md rule 6): no product file over 500 lines, no function over 80.

Ratchet: the files and functions over the limits today are listed with their size now; each may
only shrink, and leaves the list when it is under the limit (the test says so).  A new file or
function over the limit fails."""

from __future__ import annotations

import ast
from pathlib import Path
from tests.architecture import tree

ROOT = Path(__file__).resolve().parents[2]
MAX_FILE_LINES = 500
MAX_FUNCTION_LINES = 80

# file -> its line count when the ratchet was set (may only go down)
FILES_OVER: dict[str, int] = {}

# "file:function" -> its line count when the ratchet was set (may only go down)
FUNCTIONS_OVER: dict[str, int] = {}


def product_files() -> list[Path]:
    return [
        p
        for pkg in ("bot", "channels")
        for p in sorted((ROOT / pkg).rglob("*.py"))
        if "data" not in p.relative_to(ROOT).parts
    ]


def file_sizes() -> dict[str, int]:
    return {
        str(p.relative_to(ROOT)): len(p.read_text(encoding="utf-8").splitlines())
        for p in product_files()
    }


def function_sizes() -> dict[str, int]:
    sizes: dict[str, int] = {}
    for p in product_files():
        rel = str(p.relative_to(ROOT))
        for node in tree.walk_file(p):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                length = (node.end_lineno or node.lineno) - start + 1
                key = f"{rel}:{node.name}"
                sizes[key] = max(sizes.get(key, 0), length)
    return sizes


def _ratchet(now: dict[str, int], known: dict[str, int], limit: int, what: str) -> list[str]:
    problems = []
    for name, size in sorted(now.items()):
        if size <= limit:
            if name in known:
                problems.append(f"{name} is {size} lines now: remove it from the list of {what}")
            continue
        if name not in known:
            problems.append(f"{name}: {size} lines (over {limit}); split it by job")
        elif size > known[name]:
            problems.append(f"{name}: grew from {known[name]} to {size} lines; it may only shrink")
    problems += [f"{n} is gone: remove it from the list of {what}" for n in known if n not in now]
    return problems


def test_no_product_file_grows_past_500_lines():
    assert _ratchet(file_sizes(), FILES_OVER, MAX_FILE_LINES, "FILES_OVER") == []


def test_no_function_grows_past_80_lines():
    assert _ratchet(function_sizes(), FUNCTIONS_OVER, MAX_FUNCTION_LINES, "FUNCTIONS_OVER") == []


def test_the_ratchet_catches_growth_and_new_offenders():
    assert _ratchet({"a.py": 600}, {"a.py": 550}, 500, "X") == [
        "a.py: grew from 550 to 600 lines; it may only shrink"
    ]
    assert _ratchet({"b.py": 501}, {}, 500, "X") == ["b.py: 501 lines (over 500); split it by job"]
    assert _ratchet({"c.py": 10}, {"c.py": 600}, 500, "X") == [
        "c.py is 10 lines now: remove it from the list of X"
    ]
