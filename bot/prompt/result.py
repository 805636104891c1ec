"""What a prompt build returns: the text, and a report of what shaped it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class SectionReport:
    heading: str
    chars: int


@dataclass
class FileReport:
    name: str
    path: str
    status: str  # ok | truncated | missing | default
    raw_chars: int
    injected_chars: int


@dataclass
class SkillReport:
    name: str
    location: str
    chars: int  # size of its <skill> entry in the prompt


@dataclass
class ToolReport:
    name: str
    line_chars: int  # its line in ## Tooling
    schema_chars: int  # JSON of its function schema (what a native tool API gets)


@dataclass(eq=False)
class PromptResult:
    text: str
    sections: list[SectionReport] = field(default_factory=list)
    files: list[FileReport] = field(default_factory=list)
    deps: dict[str, tuple[int, int] | None] = field(default_factory=dict)
    project_files: list[FileReport] = field(default_factory=list)
    skills: list[SkillReport] = field(default_factory=list)
    tools: list[ToolReport] = field(default_factory=list)
    skills_chars: int = 0  # the whole ## Skills section
    tool_list_chars: int = 0  # the whole ## Tooling section
    tool_schema_chars: int = 0  # sum of ToolReport.schema_chars
    project_context_chars: int = 0
    listed_dirs: tuple[str, ...] = ()  # directories whose listing shaped the prompt
    mode: str = "full"  # effective mode
    identity_source: str = "markdown"  # markdown | aieos

    @property
    def chars(self) -> int:
        return len(self.text)

    @property
    def approx_tokens(self) -> int:
        return len(self.text) // 4

    def to_json(self) -> dict[str, Any]:
        return {
            "prompt": self.text,
            "sections": [{"heading": s.heading, "chars": s.chars} for s in self.sections],
            "files": [
                {
                    "name": f.name,
                    "path": f.path,
                    "status": f.status,
                    "raw_chars": f.raw_chars,
                    "injected_chars": f.injected_chars,
                }
                for f in self.files
            ],
            "chars": self.chars,
            "approx_tokens": self.approx_tokens,
        }
