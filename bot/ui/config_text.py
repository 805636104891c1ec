"""The Config page's pure helpers: the form's keys, setting a key in the TOML text without
losing the rest of the file (its comments, its order), refusing a secret written where the
name of its variable belongs, the problems of a verdict by TOML key, and which keys differ
from the running config (those need a restart).

No TOML writer is a dependency: a form change replaces one ``key = value`` line inside its
``[section]`` (or adds it), and the result is parsed again; a key written any other way
(a dotted key, a multi-line value) is left to the raw editor."""

from __future__ import annotations

import json
import re
import tomllib
from dataclasses import dataclass
from typing import Any, Literal

FieldKind = Literal["text", "bool", "number", "env"]


@dataclass(frozen=True)
class FormField:
    section: str  # a TOML table, e.g. "channels.http"
    key: str
    kind: FieldKind

    @property
    def path(self) -> str:
        return f"{self.section}.{self.key}"


def _fields(section: str, *keys: str) -> list[FormField]:
    out = []
    for key in keys:
        name, _, kind = key.partition(":")
        out.append(FormField(section, name, kind or "text"))  # type: ignore[arg-type]
    return out


# the common keys of each section; everything else is edited in the raw TOML
FORM: tuple[FormField, ...] = (
    *_fields(
        "agent",
        "model",
        "api_base",
        "api_key_env:env",
        "timezone",
        "thinking",
        "daily_cost_limit_usd:number",
    ),
    *_fields("heartbeat", "every", "target", "to"),
    *_fields("session", "dm_scope"),
    *_fields("channels.telegram", "enabled:bool", "token_env:env"),
    *_fields("channels.discord", "enabled:bool", "token_env:env"),
    *_fields("channels.slack", "enabled:bool", "bot_token_env:env", "app_token_env:env"),
    *_fields("channels.signal", "enabled:bool"),
    *_fields("channels.http", "enabled:bool", "listen"),
    *_fields("ui", "read_only:bool", "session_idle", "session_max"),
)
BY_PATH = {f.path: f for f in FORM}
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
_HEADER = re.compile(r"^\s*\[([^\[\]]+)\]\s*(#.*)?$")  # [table], not [[array]]


class FormError(ValueError):
    """A form value that cannot be written (the message names the key)."""


def value_at(data: Any, dotted: str) -> Any:
    """``data``'s value at a dotted path (attributes or mapping keys); None when absent."""
    node = data
    for part in dotted.split("."):
        node = node.get(part) if isinstance(node, dict) else getattr(node, part, None)
        if node is None:
            return None
    return node


def toml_value(field: FormField, value: Any) -> str:
    """``value`` written as TOML for ``field``; FormError names the key."""
    if field.kind == "bool":
        if not isinstance(value, bool):
            raise FormError(f"{field.path}: must be true or false")
        return "true" if value else "false"
    if field.kind == "number":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise FormError(f"{field.path}: must be a number")
        return repr(float(value)) if isinstance(value, float) else str(value)
    if not isinstance(value, str) or "\n" in value or "\r" in value:
        raise FormError(f"{field.path}: must be one line of text")
    return json.dumps(value)  # a TOML basic string: JSON's escapes are TOML's


def _header_name(line: str) -> str | None:
    m = _HEADER.match(line)
    if not m:
        return None
    return ".".join(p.strip().strip('"') for p in m.group(1).split("."))


def _section_span(lines: list[str], section: str) -> tuple[int, int] | None:
    """The lines of ``[section]``'s body: (first, end), or None when it has no header."""
    start = None
    for i, line in enumerate(lines):
        is_header = line.lstrip().startswith("[")
        if start is not None and is_header:
            return start, i
        if is_header and _header_name(line) == section:
            start = i + 1
    return (start, len(lines)) if start is not None else None


def _comment_of(rest: str) -> str:
    """The trailing ``# comment`` of a value (kept when the value is replaced)."""
    for i, ch in enumerate(rest):
        if ch != "#":
            continue
        try:
            tomllib.loads("x = " + rest[:i])
        except tomllib.TOMLDecodeError:
            continue
        return "  " + rest[i:].strip()
    return ""


def set_key(text: str, field: FormField, value: Any) -> str:
    """``text`` with ``field`` set to ``value``: its line replaced in ``[section]``, added
    to that table, or a new table at the end.  FormError when the result does not parse
    to that value (the key is written some other way: use the raw editor)."""
    written = toml_value(field, value)
    lines = text.split("\n")
    key_line = re.compile(rf"^(\s*){re.escape(field.key)}\s*=\s*(.*)$")
    span = _section_span(lines, field.section)
    if span is None:
        tail = "" if text.endswith("\n") or not text else "\n"
        out = f"{text}{tail}\n[{field.section}]\n{field.key} = {written}\n"
    else:
        first, end = span
        for i in range(first, end):
            m = key_line.match(lines[i])
            if m:
                lines[i] = f"{m.group(1)}{field.key} = {written}{_comment_of(m.group(2))}"
                break
        else:
            lines.insert(first, f"{field.key} = {written}")
        out = "\n".join(lines)
    try:
        got = value_at(tomllib.loads(out), field.path)
    except tomllib.TOMLDecodeError:
        got = None
    if got != value:
        raise FormError(f"{field.path}: cannot be set from the form here; edit it in the raw TOML")
    return out


def apply_form(text: str, changes: dict[str, Any]) -> str:
    """``text`` with every ``{"section.key": value}`` of the form set."""
    for path, value in changes.items():
        field = BY_PATH.get(path)
        if field is None:
            raise FormError(f"{path}: not a key of the form; edit it in the raw TOML")
        text = set_key(text, field, value)
    return text


def _env_values(node: Any, where: str) -> list[tuple[str, Any]]:
    found: list[tuple[str, Any]] = []
    if isinstance(node, dict):
        for k, v in node.items():
            path = f"{where}.{k}" if where else str(k)
            if str(k).endswith("_env"):
                items = v.items() if isinstance(v, dict) else [("", v)]
                found += [(f"{path}.{sub}" if sub else path, val) for sub, val in items]
            else:
                found += _env_values(v, path)
    elif isinstance(node, list):
        for i, v in enumerate(node):
            found += _env_values(v, f"{where}[{i}]")
    return found


def env_problems(data: dict[str, Any]) -> list[tuple[str, str]]:
    """Every ``*_env`` key whose value is not the name of a variable, as (key, message):
    a secret pasted where its variable's name belongs.  The value is never repeated."""
    out = []
    for path, value in _env_values(data, ""):
        if value == "" or (isinstance(value, str) and ENV_NAME.fullmatch(value)):
            continue
        out.append(
            (
                path,
                "must be the name of an environment variable (letters, digits, '_'), never "
                "the secret itself: put the secret in the environment and its name here",
            )
        )
    return out


_KEY = re.compile(r"^([A-Za-z_][\w-]*(?:\[\d+\])?(?:\.[\w-]+(?:\[\d+\])?)*)(?::| =)")


def by_key(line: str) -> tuple[str, str]:
    """A verdict line as (TOML key, message): ``agent.model = 'x': ...`` → ``agent.model``;
    ``""`` when the line names no key."""
    m = _KEY.match(line.strip())
    return (m.group(1), line.strip()) if m else ("", line.strip())


def load_errors(message: str) -> list[tuple[str, str]]:
    """The lines of a loader's error (``invalid config:\\nkey: msg``…) by key."""
    lines = [ln for ln in message.splitlines()[1:] if ln.strip()] or [message]
    return [by_key(ln) for ln in lines]


def _flat(node: Any, where: str, out: dict[str, Any]) -> dict[str, Any]:
    if isinstance(node, dict) and node:
        for k, v in node.items():
            _flat(v, f"{where}.{k}" if where else str(k), out)
    else:
        out[where] = node
    return out


def changed_keys(running: dict[str, Any], saved: dict[str, Any]) -> list[str]:
    """The dotted keys whose effective value differs (both as ``model_dump(mode="json")``)."""
    a, b = _flat(running, "", {}), _flat(saved, "", {})
    return sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))
