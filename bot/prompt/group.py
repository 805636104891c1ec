"""Bodies for the ``## Group Chat Context`` and ``## Subagent Context`` sections.

The builder adds the heading; callers put the returned text into
``PromptContext.extra_context``.  Nothing here may be volatile (no sender names of the
current turn, no message ids): the text becomes part of the cached system prompt.
"""

from __future__ import annotations

from typing import Literal

from bot.config.channels import platform
from bot.rules.untrusted import clean_inline

from . import texts

# labels of channels without a platform section (a platform's is its section's TITLE)
_PROVIDER_LABELS = {
    "imessage": "iMessage",
    "terminal": "Terminal",
    "http": "HTTP",
    "matrix": "Matrix",
}


def provider_label(provider: str) -> str:
    """Human label of a channel id (``telegram`` -> ``Telegram``)."""
    key = provider.strip().lower()
    if (section := platform(key)) is not None:
        return section.TITLE
    if key in _PROVIDER_LABELS:
        return _PROVIDER_LABELS[key]
    return key[:1].upper() + key[1:] if key else "chat"


def group_chat_context(
    provider: str,
    title: str,
    participants: list[str],
    activation: Literal["mention", "always"] = "mention",
    include_activation: bool = False,
) -> str:
    label = provider_label(provider)
    title = clean_inline(title, 120).replace("\\", "\\\\").replace('"', '\\"')
    lines = [
        texts.GROUP_LINE.format(provider=label, title=title)
        if title
        else texts.GROUP_LINE_UNTITLED.format(provider=label)
    ]
    names: list[str] = []
    seen: set[str] = set()
    for raw in participants:
        p = clean_inline(str(raw), 64)
        if p and p.lower() not in seen:
            seen.add(p.lower())
            names.append(p)
    if names:
        lines.append(texts.GROUP_PARTICIPANTS.format(names=", ".join(names)))
    lines.append(texts.GROUP_DELIVERY)
    if include_activation:
        lines.append(texts.GROUP_ALWAYS if activation == "always" else texts.GROUP_MENTION)
    lines.append(texts.GROUP_HISTORY)
    return "\n".join(lines)


def subagent_context(task_label: str) -> str:
    task = " ".join(task_label.split())
    if not task:
        return "\n".join(texts.SUBAGENT_LINES_NO_TASK)
    return "\n".join(line.format(task=task) for line in texts.SUBAGENT_LINES)
