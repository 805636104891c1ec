"""Tool names and input schemas from MCP servers, made acceptable to every provider
litellm talks to (OpenAI, Anthropic, Gemini, local servers).

* Names: ``<server>__<tool>``, only ``[A-Za-z0-9_-]``, at most 64 characters (a long
  name is cut and given a short hash so two long names stay distinct).
* Schemas: an object at the top with ``properties``; local ``$ref``s inlined (Gemini
  has no references); ``$schema``/``$id``/``$defs``/``title``... dropped; a type list
  such as ``["string", "null"]`` reduced to its first non-null type; arrays always carry
  ``items``; ``required`` only names properties that exist; invisible and bidirectional
  formatting characters removed from descriptions.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from bot.rules.untrusted import strip_invisible

MAX_NAME = 64
_DROP_KEYS = {
    "$schema",
    "$id",
    "$defs",
    "definitions",
    "$comment",
    "title",
    "examples",
    "default",
    "additionalItems",
    "unevaluatedProperties",
    "$anchor",
    "readOnly",
    "writeOnly",
    "deprecated",
}


def tool_name(server: str, tool: str) -> str:
    clean = re.sub(r"[^A-Za-z0-9_-]", "_", tool) or "tool"
    name = f"{server}__{clean}"
    if len(name) <= MAX_NAME:
        return name
    digest = hashlib.sha1(tool.encode("utf-8")).hexdigest()[:8]
    return name[: MAX_NAME - 9] + "_" + digest


def normalize_schema(schema: Any) -> dict[str, Any]:
    if not isinstance(schema, dict):
        return {"type": "object", "properties": {}}
    defs = {}
    for key in ("$defs", "definitions"):
        if isinstance(schema.get(key), dict):
            defs.update({f"#/{key}/{k}": v for k, v in schema[key].items()})
    out = _clean(schema, defs, 0)
    if not isinstance(out, dict) or out.get("type") != "object":
        out = {
            "type": "object",
            "properties": out.get("properties", {}) if isinstance(out, dict) else {},
        }
    out.setdefault("properties", {})
    return out


def _clean(node: Any, defs: dict[str, Any], depth: int) -> Any:
    if isinstance(node, list):
        return [_clean(x, defs, depth + 1) for x in node]
    if not isinstance(node, dict):
        return node
    if depth > 24:
        return {"type": "object"}
    ref = node.get("$ref")
    if isinstance(ref, str):
        return _clean(_inline_ref(node, ref, defs), defs, depth + 1)
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _DROP_KEYS:
            continue
        _clean_entry(out, key, value, defs, depth)
    _settle_type(out)
    return out


def _inline_ref(node: dict[str, Any], ref: str, defs: dict[str, Any]) -> dict[str, Any]:
    """``node`` with its local ``$ref`` replaced by the target's keys (the node's own
    keys win); an unknown reference becomes an object."""
    target = defs.get(ref)
    merged = {k: v for k, v in node.items() if k != "$ref"}
    if isinstance(target, dict):
        merged = {**target, **merged}
    else:
        merged.setdefault("type", "object")
    return merged


def _clean_entry(
    out: dict[str, Any], key: str, value: Any, defs: dict[str, Any], depth: int
) -> None:
    if key == "description" and isinstance(value, str):
        out[key] = strip_invisible(value)  # the server's words
    elif key == "properties" and isinstance(value, dict):
        out[key] = {str(k): _clean(v, defs, depth + 1) for k, v in value.items()}
    elif key in ("items", "additionalProperties", "not") and isinstance(value, dict):
        out[key] = _clean(value, defs, depth + 1)
    elif key in ("anyOf", "oneOf", "allOf") and isinstance(value, list):
        _merge_options(out, key, value, defs, depth)
    else:
        out[key] = value


def _merge_options(
    out: dict[str, Any], key: str, value: list[Any], defs: dict[str, Any], depth: int
) -> None:
    options = [_clean(v, defs, depth + 1) for v in value]
    non_null = [o for o in options if not (isinstance(o, dict) and o.get("type") == "null")]
    if len(non_null) == 1 and isinstance(non_null[0], dict):
        # Optional[X]: the common shape; keep X itself
        for k, v in non_null[0].items():
            out.setdefault(k, v)
    elif non_null:
        out[key] = non_null


def _settle_type(out: dict[str, Any]) -> None:
    """One type (not a list); arrays carry ``items``; objects carry ``properties`` and a
    ``required`` naming only properties that exist."""
    t = out.get("type")
    if isinstance(t, list):
        kinds = [x for x in t if x != "null"]
        out["type"] = kinds[0] if kinds else "string"
        t = out["type"]
    if t == "array" and not isinstance(out.get("items"), dict):
        out["items"] = {}
    if t == "object" or "properties" in out:
        _settle_object(out)


def _settle_object(out: dict[str, Any]) -> None:
    props = out.get("properties")
    if not isinstance(props, dict):
        props = out["properties"] = {}
    out.setdefault("type", "object")
    req = out.get("required")
    if isinstance(req, list):
        req = [r for r in req if r in props]
        if req:
            out["required"] = req
        else:
            out.pop("required")
