"""System-prompt engine: pure builder, cache, hooks, reports and starter files.

from bot.prompt import PromptContext, build_prompt, PromptCache
"""

from __future__ import annotations

from .builder import build_prompt
from .result import FileReport, PromptResult, SectionReport
from .cache import PromptCache
from .context import PromptContext, RuntimeInfo, ToolSpec

__all__ = [
    "FileReport",
    "PromptCache",
    "PromptContext",
    "PromptResult",
    "RuntimeInfo",
    "SectionReport",
    "ToolSpec",
    "build_prompt",
]
