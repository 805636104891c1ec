"""Skills without front matter (issue 27): the name is the directory's, the description the
first paragraph of the body; a heading-only SKILL.md gets a short placeholder."""

from __future__ import annotations

from pathlib import Path

from bot.prompt import PromptContext, build_prompt
from bot.prompt.skills import PLACEHOLDER


def _skill(ws: Path, name: str, text: str) -> None:
    d = ws / "skills" / name
    d.mkdir(parents=True)
    (d / "SKILL.md").write_text(text)


def _block(prompt: str, name: str) -> str:
    start = prompt.index(f"<name>{name}</name>")
    return prompt[start : prompt.index("</skill>", start)]


def test_skill_without_front_matter_uses_the_body(tmp_path: Path) -> None:
    _skill(
        tmp_path,
        "weather",
        "# Weather\n\nLook up the forecast for a city\nwith the wttr.in service.\n\n## Steps\n1. x\n",
    )
    _skill(tmp_path, "empty", "# Empty\n\n## Only headings\n")
    prompt = build_prompt(PromptContext(workspace=tmp_path)).text
    assert (
        "<description>Look up the forecast for a city with the wttr.in service.</description>"
        in _block(prompt, "weather")
    )
    assert f"<description>{PLACEHOLDER}</description>" in _block(prompt, "empty")


def test_front_matter_description_still_wins(tmp_path: Path) -> None:
    _skill(
        tmp_path,
        "dir",
        "---\nname: named\ndescription: From the front matter.\n---\n\nBody text.\n",
    )
    _skill(tmp_path, "noname", "---\nname: other\n---\nFirst paragraph here.\n")
    prompt = build_prompt(PromptContext(workspace=tmp_path)).text
    assert "<description>From the front matter.</description>" in _block(prompt, "named")
    assert "<description>First paragraph here.</description>" in _block(prompt, "other")
