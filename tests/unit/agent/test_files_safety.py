"""read / write / edit cannot be redirected out of the file root by planted symlinks,
and files they create are private.  Every refusal has a legitimate twin next to it."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from bot.agent.tools import ToolContext, build_registry
from bot.agent.tools import files as files_mod

SECRET = "TOPSECRET"


@pytest.fixture
def reg():
    return build_registry(["read", "write", "edit"])


@pytest.fixture
def ws(tmp_path):
    w = tmp_path / "ws"
    w.mkdir()
    return w


@pytest.fixture
def outside(tmp_path):
    o = tmp_path / "outside"
    o.mkdir()
    (o / "secret.txt").write_text(SECRET)
    return o


@pytest.fixture
def umask022():
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def ctx(ws: Path) -> ToolContext:
    return ToolContext(file_root=ws, session_key="agent:main:main")


def mode(p: Path) -> int:
    return stat.S_IMODE(os.lstat(p).st_mode)


def outside_untouched(outside: Path) -> None:
    assert (outside / "secret.txt").read_text() == SECRET
    assert sorted(os.listdir(outside)) == ["secret.txt"]


# ------------------------------------------------------------------ planted temp names


async def test_planted_old_temp_name_is_not_followed(reg, ws, outside):
    # the old code wrote ".<name>.chela-tmp" with write_bytes, following a link there
    (ws / "f.txt").write_text("hello world")
    os.symlink(outside / "secret.txt", ws / ".f.txt.chela-tmp")
    os.symlink(outside / "secret.txt", ws / ".new.txt.chela-tmp")
    c = ctx(ws)
    out = await reg.execute("write", {"path": "f.txt", "content": "rewritten"}, c)
    assert out.startswith("Wrote 9 bytes to f.txt"), out
    out = await reg.execute(
        "edit", {"path": "f.txt", "old_text": "rewritten", "new_text": "edited"}, c
    )
    assert out.startswith("Edited f.txt"), out
    out = await reg.execute("write", {"path": "new.txt", "content": "fresh"}, c)
    assert out.startswith("Wrote 5 bytes to new.txt"), out
    assert (ws / "f.txt").read_text() == "edited"
    assert (ws / "new.txt").read_text() == "fresh"
    assert not (ws / "f.txt").is_symlink() and not (ws / "new.txt").is_symlink()
    outside_untouched(outside)
    # no temp files left behind (only the planted links and the real files)
    assert sorted(os.listdir(ws)) == [".f.txt.chela-tmp", ".new.txt.chela-tmp", "f.txt", "new.txt"]


async def test_planted_temp_in_nested_dir(reg, ws, outside):
    (ws / "d").mkdir()
    os.symlink(outside / "secret.txt", ws / "d" / ".n.txt.chela-tmp")
    out = await reg.execute("write", {"path": "d/n.txt", "content": "inside"}, ctx(ws))
    assert out.startswith("Wrote"), out
    assert (ws / "d" / "n.txt").read_text() == "inside"
    outside_untouched(outside)


# ------------------------------------------------------------------ the target itself


async def test_symlink_target_pointing_outside_refused(reg, ws, outside):
    os.symlink(outside / "secret.txt", ws / "t.txt")
    c = ctx(ws)
    for tool, args in (
        ("read", {"path": "t.txt"}),
        ("write", {"path": "t.txt", "content": "pwned"}),
        ("edit", {"path": "t.txt", "old_text": SECRET, "new_text": "pwned"}),
    ):
        out = await reg.execute(tool, args, c)
        assert out.startswith("Error:") and "outside the workspace" in out, (tool, out)
    outside_untouched(outside)
    assert os.readlink(ws / "t.txt") == str(outside / "secret.txt")


async def test_dangling_symlink_target_to_outside_refused(reg, ws, outside):
    # a link to a file that does not exist yet: writing must not create it outside
    os.symlink(outside / "created.txt", ws / "t.txt")
    out = await reg.execute("write", {"path": "t.txt", "content": "pwned"}, ctx(ws))
    assert out.startswith("Error:"), out
    outside_untouched(outside)


async def test_in_workspace_symlink_read_works_write_refused(reg, ws, outside):
    (ws / "a").mkdir()
    (ws / "a" / "real.txt").write_text("inner text")
    os.symlink(ws / "a" / "real.txt", ws / "alias.txt")
    os.symlink("a", ws / "dirlink")
    c = ctx(ws)
    # legitimate: reading through links that stay inside
    assert await reg.execute("read", {"path": "alias.txt"}, c) == "inner text"
    assert await reg.execute("read", {"path": "dirlink/real.txt"}, c) == "inner text"
    # writing through any link is refused; nothing changes
    for tool, args in (
        ("write", {"path": "alias.txt", "content": "x"}),
        ("edit", {"path": "alias.txt", "old_text": "inner", "new_text": "x"}),
        ("write", {"path": "dirlink/real.txt", "content": "x"}),
        ("write", {"path": "dirlink/new.txt", "content": "x"}),
    ):
        out = await reg.execute(tool, args, c)
        assert out.startswith("Error:") and "symbolic link" in out, (tool, out)
    assert (ws / "a" / "real.txt").read_text() == "inner text"
    assert not (ws / "a" / "new.txt").exists()
    assert (ws / "alias.txt").is_symlink()
    # the real path still works
    out = await reg.execute(
        "edit", {"path": "a/real.txt", "old_text": "inner", "new_text": "outer"}, c
    )
    assert out.startswith("Edited a/real.txt"), out
    assert (ws / "a" / "real.txt").read_text() == "outer text"
    outside_untouched(outside)


# ------------------------------------------------------------------ symlinked parents


async def test_symlinked_parent_dir_outside_refused(reg, ws, outside):
    os.symlink(outside, ws / "sub")
    c = ctx(ws)
    for tool, args in (
        ("read", {"path": "sub/secret.txt"}),
        ("write", {"path": "sub/secret.txt", "content": "pwned"}),
        ("write", {"path": "sub/new/deeper.txt", "content": "pwned"}),
        ("edit", {"path": "sub/secret.txt", "old_text": SECRET, "new_text": "pwned"}),
    ):
        out = await reg.execute(tool, args, c)
        assert out.startswith("Error:") and "outside the workspace" in out, (tool, out)
    outside_untouched(outside)


async def test_nested_new_directories_created(reg, ws, umask022):
    c = ctx(ws)
    out = await reg.execute("write", {"path": "x/y/z/file.md", "content": "deep"}, c)
    assert out.startswith("Wrote 4 bytes to x/y/z/file.md"), out
    assert (ws / "x/y/z/file.md").read_text() == "deep"
    for d in ("x", "x/y", "x/y/z"):
        assert mode(ws / d) == 0o700, d
    assert await reg.execute("read", {"path": "x/y/z/file.md"}, c) == "deep"


# ------------------------------------------------------------------ swapped after the check


@pytest.fixture
def no_precheck(monkeypatch):
    """Simulate a symlink swapped in between the path check and the I/O: the check
    sees the lexical path (as if it were still a plain directory/file)."""

    def lexical(workspace, path):
        root = Path(workspace).resolve()
        return Path(os.path.normpath(root / path))

    monkeypatch.setattr(files_mod, "resolve_in_workspace", lexical)


async def test_race_swapped_parent_dir_refused(reg, ws, outside, no_precheck):
    os.symlink(outside, ws / "sub")
    c = ctx(ws)
    for tool, args in (
        ("read", {"path": "sub/secret.txt"}),
        ("write", {"path": "sub/secret.txt", "content": "pwned"}),
        ("write", {"path": "sub/new.txt", "content": "pwned"}),
        ("edit", {"path": "sub/secret.txt", "old_text": SECRET, "new_text": "pwned"}),
    ):
        out = await reg.execute(tool, args, c)
        assert out.startswith("Error:") and "symbolic link" in out, (tool, out)
    outside_untouched(outside)


async def test_race_swapped_target_file(reg, ws, outside, no_precheck):
    os.symlink(outside / "secret.txt", ws / "t.txt")
    c = ctx(ws)
    out = await reg.execute("read", {"path": "t.txt"}, c)
    assert out.startswith("Error:") and SECRET not in out, out
    out = await reg.execute("edit", {"path": "t.txt", "old_text": SECRET, "new_text": "pwned"}, c)
    assert out.startswith("Error:") and "symbolic link" in out, out
    # write either refuses or replaces the link itself; never writes outside
    await reg.execute("write", {"path": "t.txt", "content": "mine"}, c)
    outside_untouched(outside)
    if not (ws / "t.txt").is_symlink():
        assert (ws / "t.txt").read_text() == "mine"


async def test_race_twin_plain_paths_still_work(reg, ws, no_precheck):
    c = ctx(ws)
    assert (await reg.execute("write", {"path": "p/q.txt", "content": "abc"}, c)).startswith(
        "Wrote"
    )
    assert await reg.execute("read", {"path": "p/q.txt"}, c) == "abc"
    assert (
        await reg.execute("edit", {"path": "p/q.txt", "old_text": "b", "new_text": "B"}, c)
    ).startswith("Edited")
    assert (ws / "p/q.txt").read_text() == "aBc"


# ------------------------------------------------------------------ ordinary use and modes


async def test_normal_write_edit_read(reg, ws):
    c = ctx(ws)
    assert (
        await reg.execute("write", {"path": "notes.txt", "content": "alpha beta"}, c)
    ).startswith("Wrote 10 bytes")
    assert await reg.execute("read", {"path": "notes.txt"}, c) == "alpha beta"
    out = await reg.execute(
        "edit", {"path": "notes.txt", "old_text": "beta", "new_text": "gamma"}, c
    )
    assert out == "Edited notes.txt: replaced 1 occurrence."
    assert await reg.execute("read", {"path": str(ws / "notes.txt")}, c) == "alpha gamma"
    assert sorted(os.listdir(ws)) == ["notes.txt"]  # no temp files left


async def test_new_file_is_0600_under_umask_022(reg, ws, umask022):
    c = ctx(ws)
    await reg.execute("write", {"path": "new.txt", "content": "x"}, c)
    assert mode(ws / "new.txt") == 0o600
    await reg.execute("edit", {"path": "new.txt", "old_text": "x", "new_text": "y"}, c)
    assert mode(ws / "new.txt") == 0o600


async def test_overwrite_keeps_existing_mode(reg, ws, umask022):
    script = ws / "run.sh"
    script.write_text("echo hi\n")
    script.chmod(0o750)
    c = ctx(ws)
    await reg.execute("write", {"path": "run.sh", "content": "echo bye\n"}, c)
    assert mode(script) == 0o750
    await reg.execute("edit", {"path": "run.sh", "old_text": "bye", "new_text": "ciao"}, c)
    assert mode(script) == 0o750 and script.read_text() == "echo ciao\n"


async def test_special_files_not_read(reg, ws):
    os.mkfifo(ws / "pipe")
    out = await reg.execute("read", {"path": "pipe"}, ctx(ws))  # must not hang
    assert out.startswith("Error:") and "regular file" in out
    (ws / "d").mkdir()
    out = await reg.execute("write", {"path": "d", "content": "x"}, ctx(ws))
    assert out.startswith("Error:") and "directory" in out
