"""The house rules the code itself must keep (ARCHITECTURE.md, issue 18)."""

from __future__ import annotations

import ast
from pathlib import Path
from tests.architecture import tree

ROOT = Path(__file__).resolve().parents[2]


def _imports(path: Path) -> list[str]:
    names: list[str] = []
    for node in tree.walk_file(path):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
    return names


def test_channels_never_import_the_core():
    offenders = {
        str(p.relative_to(ROOT)): [n for n in _imports(p) if n == "bot" or n.startswith("bot.")]
        for p in sorted((ROOT / "channels").rglob("*.py"))
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_the_check_sees_an_import_of_the_core(tmp_path):
    # the twin: the same walk finds such an import, top-level or lazy inside a function
    f = tmp_path / "x.py"
    f.write_text("import os\n\ndef f():\n    from bot.rules.replies import parse_reply\n")
    assert "bot.rules.replies" in _imports(f)
