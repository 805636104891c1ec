"""An MCP tool result as the text the model reads."""

from __future__ import annotations

import json


def render_result(res) -> str:
    parts: list[str] = []
    for item in getattr(res, "content", None) or []:
        kind = getattr(item, "type", "")
        if kind == "text":
            parts.append(item.text)
        elif kind in ("image", "audio"):
            mime = getattr(item, "mime_type", None) or getattr(item, "mimeType", "")
            parts.append(
                f"[{kind} {mime}, {len(getattr(item, 'data', '') or '') * 3 // 4} bytes, not shown]"
            )
        elif kind == "resource":
            r = getattr(item, "resource", None)
            text = getattr(r, "text", None)
            parts.append(text if text is not None else f"[resource {getattr(r, 'uri', '')}]")
        elif kind == "resource_link":
            parts.append(f"[resource link {getattr(item, 'uri', '')}]")
        else:
            parts.append(f"[{kind or 'unknown'} content]")
    structured = getattr(res, "structured_content", None) or getattr(res, "structuredContent", None)
    if not parts and structured is not None:
        parts.append(json.dumps(structured, ensure_ascii=False, indent=2))
    return "\n".join(parts)
