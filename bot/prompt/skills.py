"""Workspace skills: ``<workspace>/skills/*/SKILL.md`` with name/description front matter.

Without front matter (or without a description in it) the name is the directory's and the
description the first paragraph of the body; a file with only headings gets a placeholder."""

from __future__ import annotations

import os
from dataclasses import dataclass
from xml.sax.saxutils import escape

from .workspace import (
    Deps,
    fm_value,
    parse_front_matter,
    read_text,
    record_stat,
    split_front_matter,
)


@dataclass(frozen=True)
class Skill:
    name: str
    description: str
    location: str  # absolute path of SKILL.md


def load_skills(workspace: str, deps: Deps) -> tuple[list[Skill], list[str]]:
    """Skills sorted by name, and the directories whose listing was used."""
    root = os.path.join(workspace, "skills")
    if record_stat(root, deps) is None:
        return [], []
    try:
        entries = sorted(os.listdir(root))
    except OSError:
        return [], [root]
    skills: list[Skill] = []
    for entry in entries:
        if entry.startswith("."):
            continue
        path = os.path.join(root, entry, "SKILL.md")
        text = read_text(path, deps)
        if text is None:
            continue
        fm = parse_front_matter(text)
        name = fm_value(fm, "name") or entry
        desc = " ".join(str(fm.get("description") or "").split()) or body_description(text)
        skills.append(Skill(name, desc, path))
    skills.sort(key=lambda s: (s.name.lower(), s.name, s.location))
    return skills, [root]


DESCRIPTION_MAX = 300
PLACEHOLDER = "No description; read SKILL.md to see what it does."


def body_description(text: str) -> str:
    """The first paragraph of the body (headings, fences and HTML comments skipped), on one
    line and at most :data:`DESCRIPTION_MAX` characters; :data:`PLACEHOLDER` when none."""
    _fm, body = split_front_matter(text)
    para: list[str] = []
    for line in body.splitlines():
        bare = line.strip()
        if bare and not bare.startswith(("#", "```", "~~~", "<!--")):
            para.append(bare)
        elif para:
            break
    desc = " ".join(" ".join(para).split())
    if len(desc) > DESCRIPTION_MAX:
        desc = desc[: DESCRIPTION_MAX - 1].rstrip() + "…"
    return desc or PLACEHOLDER


def _x(value: str) -> str:
    return escape(value, {'"': "&quot;", "'": "&apos;"})


def skill_xml(skill: Skill) -> str:
    return (
        "<skill>\n"
        f"<name>{_x(skill.name)}</name>\n"
        f"<description>{_x(skill.description)}</description>\n"
        f"<location>{_x(skill.location)}</location>\n"
        "</skill>"
    )
