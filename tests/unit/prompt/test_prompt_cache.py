"""Prompt cache: same object until a dependency changes (SPEC §2.6)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bot.prompt.cache import PromptCache, deps_fresh
from bot.prompt.context import PromptContext


@pytest.fixture(params=["inotify", "stat"])
def cache(request):
    c = PromptCache(watch=request.param == "inotify")
    if request.param == "inotify" and not c.watching:
        pytest.skip("inotify not available")
    assert c.watching is (request.param == "inotify")
    yield c
    c.close()


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    w = tmp_path / "ws"
    w.mkdir()
    (w / "AGENTS.md").write_text("agents v1")
    (w / "SOUL.md").write_text("soul v1")
    age(w / "AGENTS.md", w / "SOUL.md", w)
    return w


def age(*paths: Path) -> None:
    """Pretend the files were written an hour ago (not "racy")."""
    for p in paths:
        st = os.stat(p)
        os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns - 3600 * 10**9))


def bump_mtime(path: Path, delta_ns: int = 1) -> None:
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + delta_ns))


def test_same_object_until_change(cache: PromptCache, ws: Path) -> None:
    ctx = PromptContext(workspace=ws)
    a = cache.get(ctx)
    assert cache.get(ctx) is a and cache.get(ctx) is a
    assert cache.builds == 1
    bump_mtime(ws / "AGENTS.md")
    b = cache.get(ctx)
    assert b is not a
    assert cache.get(ctx) is b
    assert cache.builds == 2


def test_edit_between_consecutive_turns(cache: PromptCache, ws: Path) -> None:
    ctx = PromptContext(workspace=ws)
    assert "soul v1" in cache.get(ctx).text
    (ws / "SOUL.md").write_text("soul v2")  # same size, no sleep
    assert "soul v2" in cache.get(ctx).text
    (ws / "SOUL.md").write_text("a much longer soul v3")
    assert "a much longer soul v3" in cache.get(ctx).text


def test_missing_file_appears_and_disappears(cache: PromptCache, ws: Path) -> None:
    ctx = PromptContext(workspace=ws)
    a = cache.get(ctx)
    assert "new memory" not in a.text
    (ws / "MEMORY.md").write_text("new memory")
    b = cache.get(ctx)
    assert b is not a and "new memory" in b.text
    (ws / "MEMORY.md").unlink()
    c = cache.get(ctx)
    assert c is not b and "new memory" not in c.text


def test_lowercase_memory_appears(cache: PromptCache, ws: Path) -> None:
    ctx = PromptContext(workspace=ws)
    cache.get(ctx)
    (ws / "memory.md").write_text("lower memory")
    assert "lower memory" in cache.get(ctx).text


def test_atomic_replace_detected(cache: PromptCache, ws: Path) -> None:
    ctx = PromptContext(workspace=ws)
    cache.get(ctx)
    tmp = ws / ".SOUL.md.tmp"
    tmp.write_text("soul via rename")
    os.replace(tmp, ws / "SOUL.md")
    assert "soul via rename" in cache.get(ctx).text


def test_unrelated_file_keeps_object(cache: PromptCache, ws: Path) -> None:
    ctx = PromptContext(workspace=ws)
    a = cache.get(ctx)
    (ws / "notes.txt").write_text("irrelevant")
    (ws / "memory").mkdir()
    (ws / "memory" / "2024-01-01.md").write_text("day note")
    assert cache.get(ctx) is a
    assert cache.builds == 1


def test_new_skill_detected(cache: PromptCache, ws: Path) -> None:
    ctx = PromptContext(workspace=ws)
    a = cache.get(ctx)
    d = ws / "skills" / "weather"
    d.mkdir(parents=True)
    b = cache.get(ctx)
    assert "<available_skills>" not in b.text
    (d / "SKILL.md").write_text("---\nname: weather\ndescription: forecasts\n---\n")
    c = cache.get(ctx)
    assert "<name>weather</name>" in c.text and c is not a
    (d / "SKILL.md").write_text("---\nname: weather\ndescription: forecasts and radar\n---\n")
    assert "forecasts and radar" in cache.get(ctx).text


def test_symlink_target_edit_detected(cache: PromptCache, ws: Path) -> None:
    (ws / "real").mkdir()
    target = ws / "real" / "tools.md"
    target.write_text("tools v1")
    (ws / "TOOLS.md").symlink_to(target)
    ctx = PromptContext(workspace=ws)
    assert "tools v1" in cache.get(ctx).text
    target.write_text("tools v2")
    assert "tools v2" in cache.get(ctx).text


def test_workspace_dir_replaced(cache: PromptCache, ws: Path, tmp_path: Path) -> None:
    ctx = PromptContext(workspace=ws)
    assert "soul v1" in cache.get(ctx).text
    os.rename(ws, tmp_path / "old")
    ws.mkdir()
    (ws / "SOUL.md").write_text("soul fresh")
    assert "soul fresh" in cache.get(ctx).text


def test_project_file_appears(cache: PromptCache, ws: Path, tmp_path: Path) -> None:
    proj = tmp_path / "a" / "b"
    proj.mkdir(parents=True)
    ctx = PromptContext(workspace=ws, project_dir=str(proj))
    cache.get(ctx)
    (tmp_path / "a" / "CLAUDE.md").write_text("outer rules")
    assert "## ../CLAUDE.md\nouter rules" in cache.get(ctx).text
    (proj / ".claude" / "rules").mkdir(parents=True)
    cache.get(ctx)
    (proj / ".claude" / "rules" / "x.md").write_text("rule x")
    assert "rule x" in cache.get(ctx).text


def test_contexts_are_separate_and_invalidate(cache: PromptCache, ws: Path) -> None:
    a_ctx = PromptContext(workspace=ws, channel="telegram")
    b_ctx = PromptContext(workspace=ws, channel="discord")
    a, b = cache.get(a_ctx), cache.get(b_ctx)
    assert a is not b and len(cache) == 2
    assert cache.get(PromptContext(workspace=ws, channel="telegram")) is a  # equal ctx, same entry
    cache.invalidate()
    assert len(cache) == 0
    a2 = cache.get(a_ctx)
    assert a2 is not a and a2.text == a.text
    # still watching after invalidate
    (ws / "SOUL.md").write_text("soul after reload")
    assert "soul after reload" in cache.get(a_ctx).text


def test_touch_without_content_change_gives_new_object(cache: PromptCache, ws: Path) -> None:
    ctx = PromptContext(workspace=ws)
    a = cache.get(ctx)
    bump_mtime(ws / "SOUL.md", 1000)
    b = cache.get(ctx)
    assert b is not a and b.text == a.text


def test_recent_edit_rebuilds_until_settled_in_stat_mode(ws: Path) -> None:
    c = PromptCache(watch=False)
    ctx = PromptContext(workspace=ws)
    (ws / "SOUL.md").write_text("soul v2")  # recent mtime: racy
    a = c.get(ctx)
    assert "soul v2" in a.text
    # a same-size edit inside the same timestamp tick must still be seen
    st = os.stat(ws / "SOUL.md")
    (ws / "SOUL.md").write_text("soul v3")
    os.utime(ws / "SOUL.md", ns=(st.st_atime_ns, st.st_mtime_ns))
    b = c.get(ctx)
    assert "soul v3" in b.text
    assert c.get(ctx) is b  # identical rebuild keeps the object
    age(ws / "SOUL.md")
    d = c.get(ctx)
    n = c.builds
    assert c.get(ctx) is d and c.builds == n  # settled: no more rebuilds


def test_racy_window_closed_in_inotify_mode(ws: Path) -> None:
    """A change that stat cannot see, made between the read and the watch set-up."""
    from bot.prompt.builder import build_prompt

    soul = ws / "SOUL.md"
    state = {"n": 0}

    def sneaky(ctx):
        r = build_prompt(ctx)
        state["n"] += 1
        if state["n"] == 1:
            st = os.stat(soul)
            soul.write_text("soul v9")  # same size, mtime restored: invisible to stat
            os.utime(soul, ns=(st.st_atime_ns, st.st_mtime_ns))
        return r

    os.utime(soul)  # recent: racy
    c = PromptCache(sneaky, watch=True)
    if not c.watching:
        pytest.skip("inotify not available")
    assert "soul v9" in c.get(PromptContext(workspace=ws)).text
    c.close()


def test_deps_fresh() -> None:
    assert deps_fresh({"/definitely/not/here": None})
    assert not deps_fresh({"/definitely/not/here": (1, 2)})
    st = os.stat(__file__)
    assert deps_fresh({__file__: (st.st_size, st.st_mtime_ns)})
    assert not deps_fresh({__file__: None})
    assert not deps_fresh({__file__: (st.st_size, st.st_mtime_ns + 1)})


def test_build_error_propagates(cache: PromptCache) -> None:
    calls = []

    def boom(ctx):
        calls.append(ctx)
        raise RuntimeError("nope")

    c = PromptCache(boom, watch=False)
    with pytest.raises(RuntimeError):
        c.get(PromptContext())
    assert len(c) == 0


def test_second_rule_file_detected(cache: PromptCache, ws: Path, tmp_path: Path) -> None:
    proj = tmp_path / "proj"
    rules = proj / ".claude" / "rules"
    rules.mkdir(parents=True)
    (rules / "a.md").write_text("rule a")
    age(rules / "a.md", rules)
    ctx = PromptContext(workspace=ws, project_dir=str(proj))
    assert "rule a" in cache.get(ctx).text
    (rules / "b.md").write_text("rule b")
    assert "rule b" in cache.get(ctx).text


def test_a_hard_linked_file_is_not_injected(cache: PromptCache, ws: Path, tmp_path: Path) -> None:
    # a second name elsewhere could be any file of the user's: the file counts as missing
    # (SOUL.md then falls back to the default soul), so edits through the other name never
    # reach the prompt either
    other = tmp_path / "elsewhere.md"
    os.link(ws / "SOUL.md", other)
    ctx = PromptContext(workspace=ws)
    assert "soul v1" not in cache.get(ctx).text
    with open(other, "r+") as fh:
        fh.write("SOUL")
    assert "SOUL v1" not in cache.get(ctx).text


def test_max_entries_evicts_oldest(ws: Path) -> None:
    c = PromptCache(max_entries=2)
    ctxs = [PromptContext(workspace=ws, group_id=str(i)) for i in range(3)]
    first = c.get(ctxs[0])
    c.get(ctxs[1])
    c.get(ctxs[2])
    assert len(c) == 2
    assert c.get(ctxs[0]) is not first
    c.close()
