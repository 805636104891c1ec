"""Where the daemon opens, reads, writes, copies or renames files by name (SPEC §9.5
"Guest directories").

Code that touches a directory a guest can write (its file root, inbox, media, speech
output) must go through ``bot/fs.py``, which opens everything relative to a handle on the
root with no symbolic link followed.  This test lists every call site of ``open(``,
``os.open(``, ``io.open(``, ``.write_bytes(``, ``.write_text(``, ``.read_bytes(``,
``.read_text(``, ``shutil.copy*``, ``os.replace(`` and ``os.rename(`` in ``bot/`` and
``channels/`` (and ``from os``/``shutil`` imports of those names) and fails when a file
has more than the allow list below grants it.

THE ALLOW LIST MAY ONLY SHRINK.  Remove a file's entry or lower its count when its call
sites go away; never add an entry or raise a count to make this pass: route the new
code through ``bot/fs.py`` instead (``write_under``, ``read_under``, ``copy_out``,
``move_in``, ``save``, ``write_private``).  The entries below write only the daemon's
own files (config, state dir, lock, token, workspace prompt files, downloads in
progress).  A guest's downloads are read once through ``bot/fs.py`` by media intake and
handed on as bytes (``bot/media/intake.py``); the resized image copies later turns send
are read through the guest's root too (``bot/media/policy.py``).
"""

from __future__ import annotations

import ast
from pathlib import Path
from tests.architecture import tree

REPO = Path(__file__).resolve().parents[2]
SCANNED = ("bot", "channels")

ALLOWED: dict[str, int] = {
    "bot/fs.py": 12,  # the helper itself
    "bot/agent/tools/memory.py": 2,  # owner-only tools: MEMORY.md in the workspace
    "bot/agent/tools/sandbox.py": 1,
    "bot/agent/turn.py": 1,
    "bot/cli/common.py": 1,  # the chat log file (0600)
    "bot/cli/main.py": 1,  # /dev/null over a closed stdout
    "bot/cli/onboard.py": 2,
    "bot/config/load.py": 1,
    "bot/app/http_token.py": 3,
    "bot/app/lock.py": 2,
    "bot/mcp/client.py": 1,
    "bot/prompt/init.py": 3,
    "bot/prompt/workspace.py": 1,
    "bot/store/db.py": 1,  # the state database created 0600
    "channels/signal/media.py": 1,
    "channels/util.py": 1,
}

_PATH_METHODS = {"write_bytes", "write_text", "read_bytes", "read_text"}
_MODULE_CALLS = {("os", "open"), ("io", "open"), ("os", "replace"), ("os", "rename")}


def _guarded_name(module: str, name: str) -> bool:
    return (module, name) in _MODULE_CALLS or (module == "shutil" and name.startswith("copy"))


def _is_site(node: ast.AST) -> bool:
    if isinstance(node, ast.ImportFrom):  # `from shutil import copyfile` hides the module
        return any(_guarded_name(node.module or "", a.name) for a in node.names)
    if not isinstance(node, ast.Call):
        return False
    f = node.func
    if isinstance(f, ast.Name):
        return f.id == "open"
    if not isinstance(f, ast.Attribute):
        return False
    if f.attr in _PATH_METHODS:
        return True
    return isinstance(f.value, ast.Name) and _guarded_name(f.value.id, f.attr)


def call_sites(source: str) -> list[int]:
    """Line numbers of the file-access call sites in ``source``."""
    return sorted(n.lineno for n in tree.walk(source) if _is_site(n))


def violations(root: Path, allowed: dict[str, int]) -> list[str]:
    found: list[str] = []
    for top in SCANNED:
        for path in sorted((root / top).rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            lines = call_sites(path.read_text(encoding="utf-8"))
            if len(lines) > allowed.get(rel, 0):
                found.append(
                    f"{rel}: {len(lines)} file-access call site(s) at lines {lines}, "
                    f"{allowed.get(rel, 0)} allowed: go through bot/fs.py"
                )
    return found


def test_no_file_access_outside_the_allow_list():
    assert violations(REPO, ALLOWED) == []


def test_a_new_call_site_in_a_new_file_fails(tmp_path):
    for top in SCANNED:
        (tmp_path / top).mkdir()
    (tmp_path / "bot" / "fs.py").write_text("import os\nos.open('x', 0)\n")
    new = tmp_path / "channels" / "new_adapter.py"
    new.write_text("def save(p, data):\n    p.write_bytes(data)\n")
    assert violations(tmp_path, {"bot/fs.py": 1}) == [
        "channels/new_adapter.py: 1 file-access call site(s) at lines [2], 0 allowed: "
        "go through bot/fs.py"
    ]
    new.write_text("import shutil\nshutil.copyfile('a', 'b')\n")
    assert len(violations(tmp_path, {"bot/fs.py": 1})) == 1
    new.write_text("from os import rename as mv\nmv('a', 'b')\n")
    assert len(violations(tmp_path, {"bot/fs.py": 1})) == 1
    new.write_text("with open('x') as f:\n    pass\n")
    assert len(violations(tmp_path, {"bot/fs.py": 1})) == 1
    new.write_text("from PIL import Image\nImage.open('x')\n")  # not a listed call
    assert violations(tmp_path, {"bot/fs.py": 1}) == []


def test_one_more_call_site_in_an_allowed_file_fails(tmp_path):
    (tmp_path / "bot").mkdir()
    (tmp_path / "channels").mkdir()
    (tmp_path / "bot" / "lock.py").write_text("open('a')\nopen('b')\n")
    assert violations(tmp_path, {"bot/lock.py": 2}) == []
    assert len(violations(tmp_path, {"bot/lock.py": 1})) == 1
