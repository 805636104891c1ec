"""System prompt sections, order, modes and content rules (SPEC §2.1, §2.4)."""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from pathlib import Path

import pytest

from bot.prompt.builder import build_prompt, ordered_tools, runtime_line
from bot.prompt.context import PromptContext, RuntimeInfo, ToolSpec
from bot.prompt.texts import DEFAULT_HEARTBEAT_PROMPT, IDENTITY_LINE

T = ToolSpec


def tools(*names: str) -> tuple[ToolSpec, ...]:
    return tuple(T(n, f"does {n}") for n in names)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    w = tmp_path / "ws"
    w.mkdir()
    (w / "AGENTS.md").write_text("Agents body.\n")
    (w / "SOUL.md").write_text("Soul body.\n")
    (w / "TOOLS.md").write_text("Tools body.\n")
    (w / "IDENTITY.md").write_text(
        '---\nname: Nova\nemoji: "🦀"\ncreature: clockwork crab\nvibe: calm and dry\n---\nIdentity body.\n'
    )
    (w / "USER.md").write_text("---\nname: Sam\n---\nUser body.\n")
    (w / "HEARTBEAT.md").write_text("- check mail\n")
    (w / "MEMORY.md").write_text("Memory body.\n")
    return w


def skill(ws: Path, d: str, name: str, desc: str) -> Path:
    p = ws / "skills" / d / "SKILL.md"
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(f"---\nname: {json.dumps(name)}\ndescription: {json.dumps(desc)}\n---\nBody\n")
    return p


def everything(ws: Path, **kw) -> PromptContext:
    base = dict(
        workspace=ws,
        model="openai/gpt-4o-mini",
        tools=tools("read", "exec", "gateway", "memory_search", "message", "gpio_read"),
        native_tools=False,
        reasoning_tags=True,
        sandbox_enabled=True,
        timezone="Europe/Paris",
        docs_path="/opt/chela/docs",
        owner_numbers=("+15550001",),
        tts_hint="Keep spoken replies short.",
        heartbeat_enabled=True,
        channel="telegram",
        chat_type="group",
        capabilities=("media", "reactions"),
        reactions="minimal",
        extra_context="EXTRA CONTEXT BODY",
        model_aliases=(("fast", "openai/gpt-4o-mini"),),
    )
    base.update(kw)
    return PromptContext(**base)


FULL_ORDER = [
    IDENTITY_LINE,
    "## Tooling",
    "## Tool Use Protocol",
    "## Hardware Access",
    "## Tool Call Style",
    "## Safety",
    "## Chela CLI Quick Reference",
    "## Skills (mandatory)",
    "## Memory Recall",
    "## Chela Self-Update",
    "## Model Aliases",
    "call session_status",
    "## Workspace\n",
    "## Documentation",
    "## Sandbox",
    "## Authorized Senders",
    "## Current Date & Time",
    "## Workspace Files (injected)",
    "## Reply Tags",
    "## Messaging",
    "## Voice (TTS)",
    "## Group Chat Context",
    "## Reactions",
    "## Reasoning Format",
    "# Project Context",
    "## Silent Replies",
    "## Heartbeats",
    "## Channel Capabilities",
    "## Runtime",
]


def test_full_mode_has_every_section_in_order(ws: Path) -> None:
    skill(ws, "a", "alpha", "first")
    r = build_prompt(everything(ws))
    pos = [r.text.find(h) for h in FULL_ORDER]
    assert all(p >= 0 for p in pos), [h for h, p in zip(FULL_ORDER, pos) if p < 0]
    assert pos == sorted(pos)
    assert r.text.startswith(IDENTITY_LINE + "\n")
    assert "\n\n\n" not in r.text
    assert [s.heading for s in r.sections] == [
        "Identity",
        "Tooling",
        "Tool Use Protocol",
        "Hardware Access",
        "Tool Call Style",
        "Safety",
        "Chela CLI Quick Reference",
        "Skills (mandatory)",
        "Memory Recall",
        "Chela Self-Update",
        "Model Aliases",
        "Date/Time Hint",
        "Workspace",
        "Documentation",
        "Sandbox",
        "Authorized Senders",
        "Current Date & Time",
        "Workspace Files (injected)",
        "Reply Tags",
        "Messaging",
        "Voice (TTS)",
        "Group Chat Context",
        "Reactions",
        "Reasoning Format",
        "Project Context",
        "Silent Replies",
        "Heartbeats",
        "Channel Capabilities",
        "Runtime",
    ]
    # sections are joined by exactly one newline
    assert sum(s.chars for s in r.sections) + len(r.sections) - 1 == r.chars


MINIMAL_ABSENT = [
    "## Skills (mandatory)",
    "## Memory Recall",
    "## Chela Self-Update",
    "## Model Aliases",
    "## Documentation",
    "## Authorized Senders",
    "## Reply Tags",
    "## Messaging",
    "## Voice (TTS)",
    "## Group Chat Context",
    "## Silent Replies",
    "## Heartbeats",
]
MINIMAL_PRESENT = [
    "## Tooling",
    "## Tool Use Protocol",
    "## Hardware Access",
    "## Tool Call Style",
    "## Safety",
    "## Chela CLI Quick Reference",
    "call session_status",
    "## Workspace\n",
    "## Sandbox",
    "## Current Date & Time",
    "## Workspace Files (injected)",
    "## Subagent Context",
    "## Reactions",
    "## Reasoning Format",
    "# Project Context",
    "## Channel Capabilities",
    "## Runtime",
]


@pytest.mark.parametrize(
    "kw", [dict(mode="minimal"), dict(session_kind="subagent"), dict(session_kind="cron")]
)
def test_minimal_mode_sections(ws: Path, kw: dict) -> None:
    skill(ws, "a", "alpha", "first")
    r = build_prompt(everything(ws, **kw))
    for h in MINIMAL_ABSENT:
        assert h not in r.text, h
    for h in MINIMAL_PRESENT:
        assert h in r.text, h
    assert "EXTRA CONTEXT BODY" in r.text
    assert r.mode == "minimal"


def test_mode_none_is_one_line(ws: Path) -> None:
    r = build_prompt(everything(ws, mode="none"))
    assert r.text == IDENTITY_LINE
    assert [s.heading for s in r.sections] == ["Identity"]


def bare(ws: Path, **kw) -> str:
    return build_prompt(PromptContext(workspace=ws, **kw)).text


@pytest.mark.parametrize(
    "kw, heading, present",
    [
        (dict(native_tools=True), "## Tool Use Protocol", False),
        (dict(native_tools=False), "## Tool Use Protocol", True),
        (dict(tools=tools("read")), "## Hardware Access", False),
        (dict(tools=tools("hardware_board_info")), "## Hardware Access", True),
        (dict(tools=tools("arduino_upload")), "## Hardware Access", True),
        (dict(tools=tools("read")), "## Chela CLI Quick Reference", False),
        (dict(tools=tools("gateway")), "## Chela CLI Quick Reference", True),
        (dict(tools=tools("gateway")), "## Chela Self-Update", True),
        (dict(tools=tools("read")), "## Chela Self-Update", False),
        (dict(tools=tools("memory_get")), "## Memory Recall", True),
        (dict(tools=tools("memory_search")), "## Memory Recall", True),
        (dict(tools=tools("read")), "## Memory Recall", False),
        (dict(), "## Model Aliases", False),
        (dict(model_aliases=(("fast", "m1"),)), "- fast: m1", True),
        (dict(), "session_status", False),
        (dict(timezone="Asia/Tokyo"), "Time zone: Asia/Tokyo", True),
        (dict(), "## Documentation", False),
        (dict(docs_path="/d"), "## Documentation", True),
        (dict(), "## Sandbox", False),
        (dict(sandbox_enabled=True), "## Sandbox", True),
        (dict(), "## Authorized Senders", False),
        (dict(), "## Reply Tags", True),
        (dict(), "## Messaging", True),
        (dict(), "### message tool", False),
        (dict(tools=tools("message")), "### message tool", True),
        (dict(), "## Voice (TTS)", False),
        (dict(tts_hint="short"), "## Voice (TTS)", True),
        (dict(), "## Group Chat Context", False),
        (dict(reactions="ack", channel="telegram"), "## Reactions", False),
        (dict(reactions="off", channel="telegram"), "## Reactions", False),
        (dict(reactions="extensive", channel="signal"), "EXTENSIVE", True),
        (dict(reactions="minimal", channel="telegram"), "MINIMAL", True),
        (dict(), "## Reasoning Format", False),
        (dict(reasoning_tags=True), "<think>", True),
        (dict(reasoning_tags=True), "<final>", True),
        (dict(), "## Silent Replies", True),
        (dict(), "## Heartbeats", False),
        (dict(heartbeat_enabled=True), "## Heartbeats", True),
        (dict(), "## Channel Capabilities", False),
        (dict(channel="discord"), "## Channel Capabilities", True),
        (dict(), "## Runtime\nRuntime: agent=main", True),
        (dict(), "## Workspace Files (injected)", True),
        (dict(), "## Tool Call Style", True),
        (dict(), "## Safety", True),
    ],
)
def test_section_conditions(ws: Path, kw: dict, heading: str, present: bool) -> None:
    assert (heading in bare(ws, **kw)) is present


def test_timezone_only_never_clock(ws: Path) -> None:
    text = bare(ws, timezone="Europe/Paris")
    assert "## Current Date & Time\nTime zone: Europe/Paris\n" in text
    assert not re.search(r"\b\d{1,2}:\d{2}\b", text)
    assert not re.search(r"\b20\d\d-\d\d-\d\d\b", text)


def test_identity_and_user_lines(ws: Path) -> None:
    text = bare(ws)
    assert text.startswith(
        IDENTITY_LINE
        + "\nYour name is Nova 🦀.\nYou are a clockwork crab.\nYour vibe: calm and dry.\nThe user's name is Sam.\n## Tooling"
    )
    # the IDENTITY.md body still goes to Project Context, without its front matter
    assert "## IDENTITY.md\nIdentity body." in text
    assert "creature: clockwork crab" not in text


@pytest.mark.parametrize(
    "front, expected",
    [
        ("name: Nova", ["Your name is Nova."]),
        ("emoji: x", []),
        ("creature: fox\nvibe: sly", ["You are a fox.", "Your vibe: sly."]),
        ("name: [unclosed", []),  # bad YAML is tolerated
        ("", []),
    ],
)
def test_identity_lines_partial(ws: Path, front: str, expected: list[str]) -> None:
    (ws / "IDENTITY.md").write_text(f"---\n{front}\n---\nbody\n")
    (ws / "USER.md").write_text("no front matter\n")
    lines = bare(ws).split("## Tooling")[0].strip().split("\n")
    assert lines == [IDENTITY_LINE, *expected]


def test_runtime_line_order_and_normalisation() -> None:
    ctx = PromptContext(
        agent_id="main",
        model="openai/gpt-4o",
        default_model="openai/gpt-4o-mini",
        thinking="low",
        channel="Telegram",
        capabilities=("Reactions", "media", "MEDIA", "threads"),
        runtime=RuntimeInfo(
            host="box", repo="/srv/repo", os="linux", arch="x86_64", python="3.11.7", shell="bash"
        ),
    )
    assert runtime_line(ctx) == (
        "Runtime: agent=main | host=box | repo=/srv/repo | os=linux (x86_64) | python=3.11.7 | "
        "model=openai/gpt-4o | default_model=openai/gpt-4o-mini | shell=bash | channel=telegram | "
        "capabilities=media,reactions,threads | thinking=low"
    )


@pytest.mark.parametrize(
    "kw, expected",
    [
        (dict(), "Runtime: agent=main | thinking=off"),
        (
            dict(channel="discord"),
            "Runtime: agent=main | channel=discord | capabilities=none | thinking=off",
        ),
        (dict(thinking=""), "Runtime: agent=main | thinking=off"),
        (dict(runtime=RuntimeInfo(os="darwin")), "Runtime: agent=main | os=darwin | thinking=off"),
        (dict(capabilities=("media",)), "Runtime: agent=main | thinking=off"),
        (dict(agent_id="ops", model="m"), "Runtime: agent=ops | model=m | thinking=off"),
    ],
)
def test_runtime_line_variants(kw: dict, expected: str) -> None:
    assert runtime_line(PromptContext(**kw)) == expected


def test_runtime_is_last_section(ws: Path) -> None:
    text = bare(ws, channel="slack")
    assert text.endswith(
        "## Runtime\nRuntime: agent=main | channel=slack | capabilities=none | thinking=off"
    )


def test_tool_order_dedup_and_cut(ws: Path) -> None:
    long = "x" * 300
    specs = (
        T("zeta", "z"),
        T("Read", "read files"),
        T("image", "img"),
        T("exec", "run"),
        T("read", "dup lower"),
        T("Alpha", long),
        T("beta", "b"),
        T("EXEC", "dup upper"),
        T("session_status", "status"),
        T("write", "write"),
    )
    assert [t.name for t in ordered_tools(specs)] == [
        "Read",
        "write",
        "exec",
        "session_status",
        "image",
        "Alpha",
        "beta",
        "zeta",
    ]
    text = bare(ws, tools=specs, native_tools=True)
    block = text.split("## Tooling\n")[1].split("\n## ")[0].split("\n")
    tool_lines = [ln for ln in block if ln.startswith("- ")]
    assert [ln.split(":")[0] for ln in tool_lines] == [
        "- Read",
        "- write",
        "- exec",
        "- session_status",
        "- image",
        "- Alpha",
        "- beta",
        "- zeta",
    ]
    alpha = next(ln for ln in tool_lines if ln.startswith("- Alpha"))
    assert len(alpha) == 160
    assert "dup lower" not in text and "dup upper" not in text
    assert "TOOLS.md" in block[-1] and "does not grant" in block[-1]
    # without native tools the line is not cut
    text2 = bare(ws, tools=specs, native_tools=False)
    assert f"- Alpha: {long}" in text2


def test_tool_use_protocol_has_schemas(ws: Path) -> None:
    spec = T(
        "read",
        "read a file",
        {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    )
    text = bare(ws, tools=(spec,), native_tools=False)
    proto = text.split("## Tool Use Protocol\n")[1].split("\n## ")[0]
    assert '<tool_call>{"name": "<tool name>", "arguments": {...}}</tool_call>' in proto
    assert '<tool_result name="' in proto
    assert "several" in proto
    assert (
        '- read: {"properties": {"path": {"type": "string"}}, "required": ["path"], "type": "object"}'
        in proto
    )


def test_authorized_senders_raw(ws: Path) -> None:
    text = bare(ws, owner_numbers=("+15550001", "+15550002"))
    sec = text.split("## Authorized Senders\n")[1].split("\n## ")[0]
    assert "- +15550001\n- +15550002" in sec
    assert "allowlisted" in sec and "not make them the owner" in sec


def test_authorized_senders_hash(ws: Path) -> None:
    num = "+15550001"
    text = bare(ws, owner_numbers=(num,), owner_display="hash", owner_hash_secret="s3cret")
    want = hmac.new(b"s3cret", num.encode(), hashlib.sha256).hexdigest()[:12]
    assert f"- {want}\n" in text
    assert num not in text
    other = bare(ws, owner_numbers=(num,), owner_display="hash", owner_hash_secret="other")
    assert want not in other
    nosecret = bare(ws, owner_numbers=(num,), owner_display="hash")
    assert f"- {hashlib.sha256(num.encode()).hexdigest()[:12]}\n" in nosecret
    assert re.search(r"\n- [0-9a-f]{12}\n", nosecret)


def test_reply_tags_and_silent(ws: Path) -> None:
    text = bare(ws)
    tags = text.split("## Reply Tags\n")[1].split("\n## ")[0]
    assert "[[reply_to_current]]" in tags and "[[reply_to:<id>]]" in tags and "first" in tags
    silent = text.split("## Silent Replies\n")[1].split("\n## ")[0]
    assert "NO_REPLY" in silent and "alone" in silent and "whole message" in silent


def test_heartbeat_section_prompt(ws: Path) -> None:
    text = bare(ws, heartbeat_enabled=True)
    hb = text.split("## Heartbeats\n")[1].split("\n## ")[0]
    assert DEFAULT_HEARTBEAT_PROMPT in hb and "HEARTBEAT_OK" in hb
    custom = bare(ws, heartbeat_enabled=True, heartbeat_prompt="Check the plants.")
    assert "Check the plants." in custom and DEFAULT_HEARTBEAT_PROMPT not in custom
    assert "HEARTBEAT_OK" in DEFAULT_HEARTBEAT_PROMPT and "HEARTBEAT.md" in DEFAULT_HEARTBEAT_PROMPT


def test_reactions_name_channel(ws: Path) -> None:
    assert "on telegram are set to MINIMAL" in bare(ws, channel="Telegram", reactions="minimal")
    assert "on signal are set to EXTENSIVE" in bare(ws, channel="signal", reactions="extensive")


def test_channel_capabilities_media(ws: Path) -> None:
    with_media = bare(ws, channel="telegram", capabilities=("media", "threads"))
    sec = with_media.split("## Channel Capabilities\n")[1].split("\n## ")[0]
    assert "[IMAGE:<path-or-url>]" in sec and "Threads" in sec
    without = bare(ws, channel="signal").split("## Channel Capabilities\n")[1].split("\n## ")[0]
    assert "[IMAGE:" not in without


def test_group_vs_subagent_heading(ws: Path) -> None:
    assert "## Group Chat Context\nHELLO" in bare(ws, extra_context="HELLO")
    assert "## Subagent Context\nHELLO" in bare(ws, extra_context="HELLO", mode="minimal")
    assert (
        "Context\n"
        not in bare(ws, extra_context="   ")
        .split("## Workspace Files")[1]
        .split("# Project Context")[0]
    )


def test_skills_xml_escaped_and_sorted(ws: Path) -> None:
    p2 = skill(ws, "z-dir", "beta & <b>", "say \"hi\" 'now'")
    p1 = skill(ws, "a-dir", "Alpha", "first one")
    (ws / "skills" / "nodesc").mkdir()
    r = build_prompt(PromptContext(workspace=ws))
    sec = r.text.split("## Skills (mandatory)\n")[1].split("\n## ")[0]
    assert (
        "<available_skills>\n<skill>\n<name>Alpha</name>\n<description>first one</description>\n"
        f"<location>{p1}</location>\n</skill>\n<skill>\n<name>beta &amp; &lt;b&gt;</name>\n"
        "<description>say &quot;hi&quot; &apos;now&apos;</description>\n"
        f"<location>{p2}</location>\n</skill>\n</available_skills>"
    ) in sec
    assert [s.name for s in r.skills] == ["Alpha", "beta & <b>"]
    assert r.skills_chars == len("## Skills (mandatory)\n" + sec)


def test_no_skills_no_section(ws: Path) -> None:
    (ws / "skills").mkdir()
    assert "## Skills" not in bare(ws)


def test_deterministic(ws: Path) -> None:
    skill(ws, "a", "alpha", "first")
    ctx = everything(ws)
    a, b = build_prompt(ctx), build_prompt(ctx)
    assert a.text == b.text and a.to_json() == b.to_json()


def test_to_json_shape(ws: Path) -> None:
    (ws / "MEMORY.md").unlink()
    r = build_prompt(PromptContext(workspace=ws))
    j = r.to_json()
    assert list(j) == ["prompt", "sections", "files", "chars", "approx_tokens"]
    assert (
        j["prompt"] == r.text
        and j["chars"] == len(r.text)
        and j["approx_tokens"] == len(r.text) // 4
    )
    assert all(set(s) == {"heading", "chars"} for s in j["sections"])
    assert [f["name"] for f in j["files"]] == [
        "AGENTS.md",
        "SOUL.md",
        "TOOLS.md",
        "IDENTITY.md",
        "USER.md",
        "HEARTBEAT.md",
        "BOOTSTRAP.md",
        "MEMORY.md",
    ]
    assert all(
        list(f) == ["name", "path", "status", "raw_chars", "injected_chars"] for f in j["files"]
    )
    by = {f["name"]: f for f in j["files"]}
    assert by["AGENTS.md"] == {
        "name": "AGENTS.md",
        "path": str(ws / "AGENTS.md"),
        "status": "ok",
        "raw_chars": 13,
        "injected_chars": 12,
    }
    assert by["BOOTSTRAP.md"]["status"] == "missing" and by["MEMORY.md"]["status"] == "missing"
    json.dumps(j)


def test_deps_cover_probed_paths(ws: Path) -> None:
    skill(ws, "a", "alpha", "x")
    r = build_prompt(PromptContext(workspace=ws))
    assert r.deps[str(ws / "AGENTS.md")] is not None
    assert r.deps[str(ws / "BOOTSTRAP.md")] is None
    assert str(ws / "skills") in r.deps
    assert str(ws / "skills" / "a" / "SKILL.md") in r.deps


def test_project_context_soul_sentence(ws: Path) -> None:
    text = bare(ws)
    pc = text.split("# Project Context\n")[1]
    assert "SOUL.md is present" in pc.split("## AGENTS.md")[0]
    order = [
        pc.find(f"## {n}\n")
        for n in (
            "AGENTS.md",
            "SOUL.md",
            "TOOLS.md",
            "IDENTITY.md",
            "USER.md",
            "HEARTBEAT.md",
            "MEMORY.md",
        )
    ]
    assert all(o >= 0 for o in order) and order == sorted(order)
