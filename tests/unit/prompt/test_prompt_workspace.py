"""Bootstrap files, budgets, truncation, AIEOS and the project walk (SPEC §2.3–§2.5)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from bot.prompt.builder import build_prompt
from bot.prompt.context import PromptContext
from bot.prompt.texts import DEFAULT_SOUL
from bot.prompt.workspace import clean_content, parse_front_matter, truncate


def files(r):
    return {f.name: f for f in r.files}


def project_context(text: str) -> str:
    return text.split("# Project Context\n", 1)[1].split("\n## Silent Replies", 1)[0]


def mk(ws: Path, **contents: str) -> None:
    for name, body in contents.items():
        (ws / name.replace("_", ".", 1) if "_" in name else ws / name).write_text(body)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    w = tmp_path / "ws"
    w.mkdir()
    return w


# ----------------------------------------------------------------- truncation


def distinct(n: int) -> str:
    """n chars where every 10-char window is unique enough to locate slices."""
    s = "".join(f"{i:09d}|" for i in range(n // 10 + 1))
    return s[:n]


def test_truncate_default_limit_keeps_14000_and_4000(ws: Path) -> None:
    body = distinct(25000)
    (ws / "AGENTS.md").write_text(body)
    r = build_prompt(PromptContext(workspace=ws))
    f = files(r)["AGENTS.md"]
    assert f.status == "truncated" and f.raw_chars == 25000 and f.injected_chars <= 20000
    pc = project_context(r.text)
    injected = pc.split("## AGENTS.md\n", 1)[1].split("\n## SOUL.md", 1)[0]
    assert len(injected) == f.injected_chars
    marker = (
        "[... truncated AGENTS.md: kept 14000+4000 of 25000 chars; read the file for the rest ...]"
    )
    assert injected == body[:14000] + "\n" + marker + "\n" + body[-4000:]


@pytest.mark.parametrize("limit", [1000, 500, 333])
def test_truncate_small_limit_ratios(limit: int) -> None:
    body = distinct(5000)
    out = truncate(body, limit, "X.md")
    head, tail = int(0.7 * limit), int(0.2 * limit)
    marker = (
        f"[... truncated X.md: kept {head}+{tail} of 5000 chars; read the file for the rest ...]"
    )
    if head + tail + len(marker) + 2 <= limit:
        assert out == body[:head] + "\n" + marker + "\n" + body[-tail:]
    assert len(out) <= limit
    assert "truncated X.md" in out


@pytest.mark.parametrize("limit", [100, 120, 150, 200, 64, 10])
def test_truncate_never_exceeds_limit(limit: int) -> None:
    body = distinct(3000)
    out = truncate(body, limit, "AGENTS.md")
    assert len(out) <= limit
    assert body.startswith(out.split("\n")[0])


def test_truncate_no_op_when_short() -> None:
    assert truncate("abc", 3, "A") == "abc"


def test_compact_context_per_file_6000(ws: Path) -> None:
    (ws / "AGENTS.md").write_text(distinct(9000))
    r = build_prompt(PromptContext(workspace=ws, compact_context=True))
    f = files(r)["AGENTS.md"]
    assert f.status == "truncated" and f.injected_chars <= 6000
    assert "kept 4200+1200 of 9000 chars" in r.text


def test_total_budget_consumed_in_order_and_stops(ws: Path) -> None:
    (ws / "AGENTS.md").write_text("a" * 300)
    (ws / "SOUL.md").write_text("s" * 300)
    (ws / "TOOLS.md").write_text("t" * 300)
    (ws / "IDENTITY.md").write_text("i" * 300)
    (ws / "USER.md").write_text("u" * 300)
    r = build_prompt(
        PromptContext(workspace=ws, bootstrap_max_chars=1000, bootstrap_total_max_chars=700)
    )
    fs = files(r)
    assert fs["AGENTS.md"].status == "ok" and fs["AGENTS.md"].injected_chars == 300
    assert fs["SOUL.md"].status == "ok" and fs["SOUL.md"].injected_chars == 300
    # 100 remain: TOOLS.md is cut to 100
    assert fs["TOOLS.md"].status == "truncated" and fs["TOOLS.md"].injected_chars <= 100
    # nothing left: later files are not injected
    assert fs["IDENTITY.md"].injected_chars == 0 and fs["USER.md"].injected_chars == 0
    pc = project_context(r.text)
    assert "## IDENTITY.md" not in pc and "## USER.md" not in pc and "## TOOLS.md" in pc


def test_fewer_than_64_remaining_stops(ws: Path) -> None:
    (ws / "AGENTS.md").write_text("a" * 940)
    (ws / "SOUL.md").write_text("s" * 10)
    (ws / "TOOLS.md").write_text("t" * 10)
    r = build_prompt(PromptContext(workspace=ws, bootstrap_total_max_chars=1000))
    fs = files(r)
    assert fs["AGENTS.md"].injected_chars == 940
    assert fs["SOUL.md"].injected_chars == 0  # 60 < 64 remain
    assert fs["TOOLS.md"].injected_chars == 0
    assert "## SOUL.md" not in r.text
    # exactly 64 remaining still loads
    (ws / "AGENTS.md").write_text("a" * 936)
    r = build_prompt(PromptContext(workspace=ws, bootstrap_total_max_chars=1000))
    assert files(r)["SOUL.md"].injected_chars == 10


# ----------------------------------------------------------------- missing / default / cleaning


def test_missing_files(ws: Path) -> None:
    r = build_prompt(PromptContext(workspace=ws))
    fs = files(r)
    pc = project_context(r.text)
    for name in ("AGENTS.md", "TOOLS.md", "IDENTITY.md", "USER.md"):
        assert fs[name].status == "missing"
        assert f"## {name}\n[MISSING] Expected at: {ws / name}\n" in pc + "\n"
    for name in ("HEARTBEAT.md", "BOOTSTRAP.md", "MEMORY.md"):
        assert fs[name].status == "missing" and fs[name].injected_chars == 0
        assert f"## {name}" not in pc
    assert fs["SOUL.md"].status == "default"
    assert f"## SOUL.md\n{DEFAULT_SOUL}" in pc


@pytest.mark.parametrize(
    "content", ["", "   \n\n", "---\nname: x\n---\n", "<!-- only a comment -->\n"]
)
def test_empty_soul_uses_default(ws: Path, content: str) -> None:
    (ws / "SOUL.md").write_text(content)
    r = build_prompt(PromptContext(workspace=ws))
    assert files(r)["SOUL.md"].status == "default"
    assert DEFAULT_SOUL in r.text


def test_empty_file_not_injected(ws: Path) -> None:
    (ws / "AGENTS.md").write_text("\n\n   \n")
    r = build_prompt(PromptContext(workspace=ws))
    assert files(r)["AGENTS.md"].injected_chars == 0
    assert "## AGENTS.md" not in r.text


def test_front_matter_and_leading_comments_stripped(ws: Path) -> None:
    (ws / "AGENTS.md").write_text(
        "---\ntitle: x\nsummary: hidden\n---\n<!-- note one -->\n\n<!--\nmulti\n-->\n  Real content.\n<!-- kept later -->\n"
    )
    r = build_prompt(PromptContext(workspace=ws))
    assert "## AGENTS.md\nReal content.\n<!-- kept later -->\n" in r.text
    assert "hidden" not in r.text and "note one" not in r.text and "multi" not in r.text


@pytest.mark.parametrize(
    "text, fm, body",
    [
        ("---\na: 1\n---\nbody", {"a": 1}, "body"),
        ("\ufeff---\na: 1\n---\nbody", {"a": 1}, "body"),
        ("---\r\na: 1\r\n---\r\nbody\r\n", {"a": 1}, "body"),
        ("---\na: [1\n---\nbody", {}, "body"),  # invalid YAML tolerated
        ("---\n- a\n- b\n---\nbody", {}, "body"),  # not a mapping
        ("---\nno closing\nbody", {}, "---\nno closing\nbody"),
        ("text\n---\na: 1\n---\n", {}, "text\n---\na: 1\n---"),
        ("<!-- c --><!-- d -->x", {}, "x"),
        ("<!-- unterminated\nx", {}, "<!-- unterminated\nx"),
    ],
)
def test_front_matter_parsing(text: str, fm: dict, body: str) -> None:
    assert parse_front_matter(text) == fm
    assert clean_content(text) == body


def test_undecodable_bytes_replaced(ws: Path) -> None:
    (ws / "AGENTS.md").write_bytes(b"good \xff\xfe bad \xc3\x28 end")
    r = build_prompt(PromptContext(workspace=ws))
    assert "good \ufffd\ufffd bad \ufffd( end" in r.text
    assert files(r)["AGENTS.md"].status == "ok"


def test_symlink_escape_counts_as_missing(ws: Path, tmp_path: Path) -> None:
    outside = tmp_path / "secret.md"
    outside.write_text("TOP SECRET")
    (ws / "AGENTS.md").symlink_to(outside)
    (ws / "sub").mkdir()
    (ws / "sub" / "tools.md").write_text("inside tools")
    (ws / "TOOLS.md").symlink_to(ws / "sub" / "tools.md")
    r = build_prompt(PromptContext(workspace=ws))
    fs = files(r)
    assert "TOP SECRET" not in r.text
    assert fs["AGENTS.md"].status == "missing"
    assert f"[MISSING] Expected at: {ws / 'AGENTS.md'}" in r.text
    assert fs["TOOLS.md"].status == "ok" and "## TOOLS.md\ninside tools" in r.text
    assert str(ws / "sub" / "tools.md") in r.deps


def test_hard_link_to_an_outside_file_counts_as_missing(ws: Path, tmp_path: Path) -> None:
    outside = tmp_path / "id_rsa"
    outside.write_text("PRIVATE KEY MATERIAL")
    import os

    os.link(outside, ws / "AGENTS.md")
    (ws / "TOOLS.md").write_text("plain tools file")  # twin: a normal file is injected
    r = build_prompt(PromptContext(workspace=ws))
    assert "PRIVATE KEY MATERIAL" not in r.text
    assert files(r)["AGENTS.md"].status == "missing"
    assert files(r)["TOOLS.md"].status == "ok" and "plain tools file" in r.text


@pytest.mark.parametrize(
    "name, fm, expected",
    [
        (
            "IDENTITY.md",
            "name: Ada\nemoji: 🦀\nvibe: dry: mostly\n",
            ["Your name is Ada 🦀.", "Your vibe: dry: mostly."],
        ),
        ("USER.md", "name: Sam\nnote: IMPORTANT: short answers\n", ["The user's name is Sam."]),
    ],
)
def test_front_matter_values_with_colons_keep_the_whole_block(ws: Path, name, fm, expected) -> None:
    (ws / name).write_text(f"---\n{fm}---\nbody text\n")
    r = build_prompt(PromptContext(workspace=ws))
    for line in expected:
        assert line in r.text


def test_oversized_file_counts_as_missing(ws: Path) -> None:
    (ws / "AGENTS.md").write_bytes(b"a" * (2 * 1024 * 1024 + 1))
    (ws / "TOOLS.md").write_bytes(b"t" * (2 * 1024 * 1024))  # exactly 2 MiB is fine
    r = build_prompt(PromptContext(workspace=ws))
    assert files(r)["AGENTS.md"].status == "missing"
    assert files(r)["TOOLS.md"].status == "truncated"


def test_directory_named_like_file_is_missing(ws: Path) -> None:
    (ws / "AGENTS.md").mkdir()
    r = build_prompt(PromptContext(workspace=ws))
    assert files(r)["AGENTS.md"].status == "missing"


@pytest.mark.parametrize(
    "present, expected",
    [({"MEMORY.md"}, "MEMORY.md"), ({"memory.md"}, "memory.md"), (set(), "MEMORY.md")],
)
def test_memory_file_variants(ws: Path, present: set[str], expected: str) -> None:
    for name in present:
        (ws / name).write_text(f"content of {name}")
    r = build_prompt(PromptContext(workspace=ws))
    names = [f.name for f in r.files]
    assert names[-1] == expected
    assert names.count("MEMORY.md") + names.count("memory.md") == 1
    for name in present:
        assert f"## {name}\ncontent of {name}" in r.text


def test_memory_upper_wins_over_lower(ws: Path) -> None:
    (ws / "MEMORY.md").write_text("UPPER")
    try:
        (ws / "memory.md").write_text("lower")
    except OSError:  # pragma: no cover - case-insensitive fs
        pytest.skip("case-insensitive filesystem")
    if (ws / "MEMORY.md").read_text() != "UPPER":  # pragma: no cover
        pytest.skip("case-insensitive filesystem")
    r = build_prompt(PromptContext(workspace=ws))
    assert "UPPER" in r.text and "lower" not in r.text


@pytest.mark.parametrize("kind", ["subagent", "cron"])
def test_subagent_and_cron_get_first_five(ws: Path, kind: str) -> None:
    for name in (
        "AGENTS.md",
        "SOUL.md",
        "TOOLS.md",
        "IDENTITY.md",
        "USER.md",
        "HEARTBEAT.md",
        "BOOTSTRAP.md",
        "MEMORY.md",
    ):
        (ws / name).write_text(f"body of {name}")
    r = build_prompt(PromptContext(workspace=ws, session_kind=kind, mode="minimal"))
    assert [f.name for f in r.files] == [
        "AGENTS.md",
        "SOUL.md",
        "TOOLS.md",
        "IDENTITY.md",
        "USER.md",
    ]
    assert "body of HEARTBEAT.md" not in r.text and "body of MEMORY.md" not in r.text
    full = build_prompt(PromptContext(workspace=ws))
    assert "body of BOOTSTRAP.md" in full.text and "body of MEMORY.md" in full.text


# ----------------------------------------------------------------- AIEOS

AIEOS_DOC = {
    "standard": {"protocol": "AIEOS", "version": "1.1"},
    "identity": {
        "names": {"first": "Nova", "last": "Vex", "nickname": "Nov"},
        "bio": {"age_perceived": 30},
    },
    "psychology": {
        "traits": {"mbti": "INTJ"},
        "moral_compass": {"core_values": ["honesty", "care"]},
    },
    "linguistics": {
        "text_style": {"formality_level": 0.3, "style_descriptors": ["concise", "warm"]}
    },
    "motivations": {"core_drive": "Help the user thrive"},
    "custom_field": {"anything": [{"a": 1}, "b"]},
}


def test_aieos_inline_replaces_identity_and_soul(ws: Path) -> None:
    (ws / "SOUL.md").write_text("SOUL MARKDOWN")
    (ws / "IDENTITY.md").write_text("---\nname: Markdown Name\n---\nIDENTITY MARKDOWN")
    (ws / "AGENTS.md").write_text("AGENTS BODY")
    (ws / "USER.md").write_text("USER BODY")
    r = build_prompt(
        PromptContext(workspace=ws, identity_format="aieos", aieos_inline=json.dumps(AIEOS_DOC))
    )
    pc = project_context(r.text)
    assert "SOUL MARKDOWN" not in r.text and "IDENTITY MARKDOWN" not in r.text
    assert "AGENTS BODY" in pc and "USER BODY" in pc
    ident = pc.split("## Identity\n", 1)[1]
    assert ident.startswith('Name: Nova Vex (goes by "Nov")')
    for s in (
        "INTJ",
        "honesty; care",
        "concise; warm",
        "Help the user thrive",
        "### Psychology",
        "### Custom field",
    ):
        assert s in ident
    assert "AIEOS" not in ident  # the "standard" block is metadata, not persona
    assert "Your name is Nova Vex." in r.text
    assert pc.index("## AGENTS.md") < pc.index("## Identity") < pc.index("## USER.md")
    assert [f.name for f in r.files][:3] == ["AGENTS.md", "Identity", "TOOLS.md"]


def test_aieos_from_file(ws: Path) -> None:
    (ws / "identity.json").write_text(json.dumps(AIEOS_DOC))
    r = build_prompt(
        PromptContext(workspace=ws, identity_format="aieos", aieos_path="identity.json")
    )
    assert "## Identity\nName: Nova Vex" in r.text
    assert r.deps[str(ws / "identity.json")] is not None
    assert r.identity_source == "aieos"


@pytest.mark.parametrize(
    "kw",
    [
        dict(aieos_inline="{not json"),
        dict(aieos_inline="[1, 2]"),
        dict(aieos_path="nope.json"),
        dict(),
        dict(aieos_inline="{}"),
    ],
)
def test_aieos_invalid_falls_back(ws: Path, kw: dict, caplog: pytest.LogCaptureFixture) -> None:
    (ws / "SOUL.md").write_text("SOUL MARKDOWN")
    with caplog.at_level(logging.WARNING):
        r = build_prompt(PromptContext(workspace=ws, identity_format="aieos", **kw))
    assert "SOUL MARKDOWN" in r.text and "## Identity\n" not in r.text
    assert r.identity_source == "markdown"
    assert any(rec.levelno == logging.WARNING for rec in caplog.records)


# ----------------------------------------------------------------- project walk


def test_project_walk_order(tmp_path: Path, ws: Path) -> None:
    top = tmp_path / "top"
    mid = top / "mid"
    start = mid / "proj"
    (start / ".claude" / "rules").mkdir(parents=True)
    (top / "CLAUDE.md").write_text("TOP CLAUDE")
    (mid / "AGENTS.md").write_text("MID AGENTS")
    (mid / "CLAUDE.local.md").write_text("MID LOCAL")
    (start / "CLAUDE.md").write_text("START CLAUDE")
    (start / ".claude" / "rules" / "b.md").write_text("RULE B")
    (start / ".claude" / "rules" / "a.md").write_text("RULE A")
    (start / ".claude" / "rules" / "skip.txt").write_text("NOT MD")
    (ws / "AGENTS.md").write_text("WS AGENTS")
    r = build_prompt(PromptContext(workspace=ws, project_dir=str(start)))
    pc = project_context(r.text)
    order = [
        "## AGENTS.md\nWS AGENTS",
        "## ../../CLAUDE.md\nTOP CLAUDE",
        "## ../CLAUDE.local.md\nMID LOCAL",
        "## ../AGENTS.md\nMID AGENTS",
        "## CLAUDE.md\nSTART CLAUDE",
        "## .claude/rules/a.md\nRULE A",
        "## .claude/rules/b.md\nRULE B",
    ]
    pos = [pc.find(s) for s in order]
    assert all(p >= 0 for p in pos), order
    assert pos == sorted(pos)
    assert "NOT MD" not in r.text
    assert [f.name for f in r.project_files] == [
        "../../CLAUDE.md",
        "../CLAUDE.local.md",
        "../AGENTS.md",
        "CLAUDE.md",
        ".claude/rules/a.md",
        ".claude/rules/b.md",
    ]
    assert (
        str(start / "CLAUDE.local.md") in r.deps and r.deps[str(start / "CLAUDE.local.md")] is None
    )


def test_project_walk_skips_workspace_agents(tmp_path: Path, ws: Path) -> None:
    (ws / "AGENTS.md").write_text("WS AGENTS ONCE")
    proj = ws / "code"
    proj.mkdir()
    (proj / "CLAUDE.md").write_text("PROJ")
    r = build_prompt(PromptContext(workspace=ws, project_dir=str(proj)))
    assert r.text.count("WS AGENTS ONCE") == 1
    assert "## CLAUDE.md\nPROJ" in r.text


def test_project_walk_per_file_cap(tmp_path: Path, ws: Path) -> None:
    proj = tmp_path / "p"
    proj.mkdir()
    (proj / "CLAUDE.md").write_text(distinct(3000))
    r = build_prompt(PromptContext(workspace=ws, project_dir=str(proj), bootstrap_max_chars=1000))
    assert "[... truncated CLAUDE.md: kept 700+200 of 3000 chars" in r.text
    assert r.project_files[0].status == "truncated"
