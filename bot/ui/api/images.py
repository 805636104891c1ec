"""The images of a stored message as the Control UI names them: ids, never
paths.  Pure (no I/O): ``bot.ui.api.transcript`` gives each listed message its ``images``
from here, and ``bot.ui.api.media`` serves the bytes behind an id."""

from __future__ import annotations

from pathlib import Path

from bot.rules.replies import parse_reply
from bot.rules.textproto import split_reasoning


def _marker_refs(data: dict) -> list[dict[str, str]]:
    content = data.get("content")
    if not isinstance(content, str):
        return []
    plan = parse_reply(split_reasoning(content)[0])
    return [
        {"target": m.target, "name": Path(m.target).name or "image"}
        for m in plan.media
        if m.kind == "image" and not m.target.lower().startswith(("http://", "https://"))
    ]


def image_refs(data: dict) -> list[dict[str, str]]:
    """The images of one stored message, in order: a user message's stored references
    (``path``, ``mime``, ``name``), an assistant message's image markers (``target``)."""
    role = data.get("role")
    if role == "user":
        return [
            {"path": str(r.get("path") or ""), "mime": str(r.get("mime") or ""), "name": _name(r)}
            for r in data.get("media") or ()
            if isinstance(r, dict) and r.get("kind") == "image"
        ]
    if role == "assistant":
        return _marker_refs(data)
    return []


def _name(ref: dict) -> str:
    return Path(str(ref.get("name") or "image")).name[:120] or "image"


def images_of(row_id: int, data: dict) -> list[dict[str, str]]:
    """The ``images`` of §16.4's message object: ``[{"id", "name"}]`` (ids, never paths)."""
    return [{"id": f"{row_id}-{n}", "name": r["name"]} for n, r in enumerate(image_refs(data))]
