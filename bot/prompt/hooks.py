"""Prompt plugin hooks.

A plugin is an importable module defining ``before_prompt_build(event)`` and/or the
legacy ``before_agent_start(event)``.  Either may be sync or async and may carry a
``priority`` attribute (higher runs first; default 0).  A hook returns ``None`` or a
mapping (or object) with any of ``system_prompt``, ``prepend_context``,
``prepend_system_context``, ``append_system_context``.

Ordering: every ``before_prompt_build`` handler runs before every ``before_agent_start``
handler; within each group by descending priority, ties in load order.  The first
non-empty ``system_prompt`` in that order wins; text fields are joined with blank lines
in that order.  A hook that raises (or returns something unusable) is logged and ignored.
"""

from __future__ import annotations

import importlib
import inspect
import logging
from dataclasses import dataclass
from typing import Any
from collections.abc import Callable, Iterable

log = logging.getLogger(__name__)

HOOK_EVENTS = ("before_prompt_build", "before_agent_start")
_TEXT_FIELDS = ("prepend_context", "prepend_system_context", "append_system_context")


@dataclass(frozen=True)
class Handler:
    event: str  # before_prompt_build | before_agent_start
    func: Callable[[dict[str, Any]], Any]
    priority: float = 0
    source: str = ""  # module name, for logs


@dataclass
class HookResult:
    system_prompt: str | None = None
    prepend_context: str = ""
    prepend_system_context: str = ""
    append_system_context: str = ""


def _priority(func: Any) -> float:
    p = getattr(func, "priority", 0)
    try:
        return float(p)
    except (TypeError, ValueError):
        return 0.0


def handlers_from_module(module: Any) -> list[Handler]:
    name = getattr(module, "__name__", repr(module))
    out = []
    for event in HOOK_EVENTS:
        func = getattr(module, event, None)
        if callable(func):
            out.append(Handler(event, func, _priority(func), name))
    return out


def load_plugins(module_names: list[str]) -> HookRunner:
    """Import plugin modules; a module that fails to import is logged and skipped."""
    handlers: list[Handler] = []
    for raw in module_names:
        name = (raw or "").strip()
        if not name:
            continue
        try:
            module = importlib.import_module(name)
        except Exception as exc:
            log.warning("plugin %s could not be imported and is skipped: %s", name, exc)
            continue
        found = handlers_from_module(module)
        if not found:
            log.warning("plugin %s defines no prompt hooks", name)
        handlers.extend(found)
    return HookRunner(handlers)


class HookRunner:
    """Runs prompt hooks in precedence order and merges their results."""

    def __init__(
        self, handlers: Iterable[Handler | tuple[str, Callable[..., Any]] | Any] = ()
    ) -> None:
        items: list[Handler] = []
        for h in handlers:
            if isinstance(h, Handler):
                items.append(h)
            elif isinstance(h, tuple) and len(h) == 2 and h[0] in HOOK_EVENTS:
                items.append(Handler(h[0], h[1], _priority(h[1]), getattr(h[1], "__module__", "")))
            elif inspect.ismodule(h) or any(callable(getattr(h, e, None)) for e in HOOK_EVENTS):
                items.extend(handlers_from_module(h))
            else:
                raise TypeError(f"not a prompt hook handler: {h!r}")
        rank = {e: i for i, e in enumerate(HOOK_EVENTS)}
        # stable sort: event group first, then priority (high first), then load order
        self.handlers: list[Handler] = sorted(items, key=lambda h: (rank[h.event], -h.priority))

    def __bool__(self) -> bool:
        return bool(self.handlers)

    def __len__(self) -> int:
        return len(self.handlers)

    async def run(self, event: dict[str, Any]) -> HookResult:
        result = HookResult()
        texts: dict[str, list[str]] = {f: [] for f in _TEXT_FIELDS}
        for h in self.handlers:
            payload = dict(event)
            payload.setdefault("hook", h.event)
            try:
                value = h.func(payload)
                if inspect.isawaitable(value):
                    value = await value
            except Exception:
                log.exception("prompt hook %s.%s failed; ignored", h.source, h.event)
                continue
            if value is None:
                continue
            try:
                fields = _fields(value)
            except TypeError as exc:
                log.warning("prompt hook %s.%s returned %s; ignored", h.source, h.event, exc)
                continue
            sp = fields.get("system_prompt")
            if result.system_prompt is None and isinstance(sp, str) and sp.strip():
                result.system_prompt = sp
            for f in _TEXT_FIELDS:
                v = fields.get(f)
                if isinstance(v, str) and v.strip():
                    texts[f].append(v.strip())
        for f in _TEXT_FIELDS:
            setattr(result, f, "\n\n".join(texts[f]))
        return result


def _fields(value: Any) -> dict[str, Any]:
    if isinstance(value, HookResult):
        return {
            "system_prompt": value.system_prompt,
            **{f: getattr(value, f) for f in _TEXT_FIELDS},
        }
    if isinstance(value, dict):
        return value
    if any(hasattr(value, f) for f in ("system_prompt", *_TEXT_FIELDS)):
        return {f: getattr(value, f, None) for f in ("system_prompt", *_TEXT_FIELDS)}
    raise TypeError(f"unsupported value of type {type(value).__name__}")


def apply_system(prompt: str, result: HookResult) -> str:
    """The final system prompt: hook replacement (if any) wrapped by the prepend/append text."""
    base = result.system_prompt if result.system_prompt is not None else prompt
    parts = [
        p
        for p in (result.prepend_system_context.strip(), base, result.append_system_context.strip())
        if p
    ]
    return "\n\n".join(parts)


def apply_user(message: str, result: HookResult) -> str:
    """The user message with ``prepend_context`` placed before it."""
    if not result.prepend_context:
        return message
    return f"{result.prepend_context}\n\n{message}" if message else result.prepend_context
