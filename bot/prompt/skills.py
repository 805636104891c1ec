"""Workspace skills: ``<workspace>/skills/*/SKILL.md`` with name/description front matter."""

from __future__ import annotations

import os
from dataclasses import dataclass
from xml.sax.saxutils import escape

from .workspace import Deps, fm_value, parse_front_matter, read_text, record_stat


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
        desc = " ".join(str(fm.get("description") or "").split())
        skills.append(Skill(name, desc, path))
    skills.sort(key=lambda s: (s.name.lower(), s.name, s.location))
    return skills, [root]


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
