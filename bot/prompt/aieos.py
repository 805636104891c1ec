"""AIEOS identity documents (``identity_format = "aieos"``) rendered as prompt text.

AIEOS is a JSON description of an agent persona.  Typical top-level objects are
``identity`` (names, bio, origin), ``psychology`` (traits, moral compass),
``linguistics`` (text style, idiolect), ``motivations``, ``capabilities``,
``physicality``, ``history`` and ``interests``.  The renderer knows how to present the
common fields and falls back to a generic "label: value" listing for anything else, so
unknown shapes never break the build.
"""

from __future__ import annotations

import json
import logging
import os
from typing import Any

from .workspace import Deps, read_text

log = logging.getLogger(__name__)

_SECTION_ORDER = (
    "identity",
    "psychology",
    "linguistics",
    "motivations",
    "capabilities",
    "history",
    "interests",
    "physicality",
)
_SKIP_TOP = {
    "standard",
    "metadata",
    "meta",
    "$schema",
    "schema",
    "version",
    "aieos_version",
    "id",
    "uuid",
}
_MAX_DEPTH = 4
_MAX_LIST = 25


def load_aieos(path: str, inline: str, workspace: str, deps: Deps) -> dict[str, Any] | None:
    """Parse the AIEOS document from ``path`` (relative to the workspace) or ``inline``.

    Returns None (after logging a warning) when nothing usable is configured.
    """
    source = ""
    if path:
        full = os.path.join(workspace, os.path.expanduser(path))
        text = read_text(os.path.abspath(full), deps)
        if text is None:
            log.warning(
                "AIEOS identity file %s not found or unreadable; using the Markdown files", full
            )
            return None
        source = text
    elif inline:
        source = inline
    else:
        log.warning(
            "identity_format is aieos but neither aieos_path nor aieos_inline is set; using the Markdown files"
        )
        return None
    try:
        data = json.loads(source)
    except (ValueError, TypeError) as exc:
        log.warning("invalid AIEOS JSON (%s); using the Markdown files", exc)
        return None
    if not isinstance(data, dict):
        log.warning("AIEOS identity must be a JSON object; using the Markdown files")
        return None
    return data


def aieos_name(data: dict[str, Any]) -> tuple[str, str]:
    """(display name, emoji) from an AIEOS document, "" when absent."""
    raw = data.get("identity")
    ident: dict[str, Any] = raw if isinstance(raw, dict) else {}
    names = ident.get("names")
    name = ""
    if isinstance(names, dict):
        first = _scalar(names.get("first"))
        last = _scalar(names.get("last"))
        name = (
            " ".join(p for p in (first, last) if p)
            or _scalar(names.get("nickname"))
            or _scalar(names.get("full"))
        )
    elif isinstance(names, (str, int)):
        name = _scalar(names)
    if not name:
        name = _scalar(ident.get("name")) or _scalar(data.get("name"))
    emoji = _scalar(ident.get("emoji")) or _scalar(data.get("emoji"))
    return name, emoji


def render_aieos(data: dict[str, Any]) -> str:
    """Readable text for the ``## Identity`` entry (body only, no heading)."""
    lines: list[str] = []
    name, _ = aieos_name(data)
    raw = data.get("identity")
    ident: dict[str, Any] = raw if isinstance(raw, dict) else {}
    raw_names = ident.get("names")
    names: dict[str, Any] = raw_names if isinstance(raw_names, dict) else {}
    if name:
        nick = _scalar(names.get("nickname"))
        lines.append(f"Name: {name}" + (f' (goes by "{nick}")' if nick and nick != name else ""))

    keys = [k for k in _SECTION_ORDER if k in data] + [
        k for k in data if k not in _SECTION_ORDER and k.lower() not in _SKIP_TOP
    ]
    for key in keys:
        value = data[key]
        if key == "identity" and isinstance(value, dict):
            value = {k: v for k, v in value.items() if k not in ("names", "name", "emoji")}
        if key in ("name", "emoji"):
            continue
        body: list[str] = []
        _flatten(value, [], body, 0)
        if not body:
            continue
        lines.append(f"### {_label(key)}")
        lines.extend(body)
    return "\n".join(lines).strip()


def _flatten(value: Any, path: list[str], out: list[str], depth: int) -> None:
    if isinstance(value, dict):
        if depth >= _MAX_DEPTH:
            text = _scalar(json.dumps(value, ensure_ascii=False, sort_keys=True))
            if text and text != "{}":
                out.append(f"- {_path_label(path)}: {text}")
            return
        for k, v in value.items():
            _flatten(v, [*path, str(k)], out, depth + 1)
        return
    if isinstance(value, list):
        items = [
            _scalar(v) if not isinstance(v, (dict, list)) else _compact(v)
            for v in value[:_MAX_LIST]
        ]
        items = [i for i in items if i]
        if items:
            out.append(f"- {_path_label(path)}: " + "; ".join(items))
        return
    text = _scalar(value)
    if text:
        out.append(f"- {_path_label(path)}: {text}" if path else text)


def _compact(v: Any) -> str:
    if isinstance(v, dict):
        parts = [
            f"{_label(str(k))}: {_scalar(x) if not isinstance(x, (dict, list)) else _compact(x)}"
            for k, x in v.items()
        ]
        return ", ".join(p for p in parts if not p.endswith(": "))
    return ", ".join(_scalar(x) for x in v if not isinstance(x, (dict, list)))


def _scalar(v: Any) -> str:
    if v is None or isinstance(v, (dict, list)):
        return ""
    if isinstance(v, bool):
        return "yes" if v else "no"
    return " ".join(str(v).split())


def _label(key: str) -> str:
    return key.replace("_", " ").strip().capitalize()


def _path_label(path: list[str]) -> str:
    return " / ".join(_label(p) for p in path) if path else "Value"
