"""Rule 4 of ARCHITECTURE.md, "no late wiring": components are built in dependency order and
take what they need in their constructor; no code in bot/ assigns an attribute of another
component (``store.token_counter = …``, ``agent.mcp = …``, ``router.accepting = …``)."""

from __future__ import annotations

import ast
from pathlib import Path
from tests.architecture import tree

ROOT = Path(__file__).resolve().parents[2] / "bot"

# the names components go by where they are wired (parameters, locals, fields)
COMPONENTS = {
    "agent",
    "approvals",
    "compactor",
    "conversation",
    "cron",
    "daemon",
    "gate",
    "lanes",
    "llm",
    "mcp",
    "notices",
    "outbox",
    "router",
    "runner",
    "scheduler",
    "store",
    "ui",
}


def _holder(target: ast.expr) -> str | None:
    """The component whose attribute ``target`` assigns: ``store.x`` and ``self.store.x``
    name ``store``; ``self.x`` (a component's own field) names none."""
    if not isinstance(target, ast.Attribute):
        return None
    v = target.value
    if isinstance(v, ast.Name):
        return None if v.id in ("self", "cls") else v.id
    if isinstance(v, ast.Attribute) and isinstance(v.value, ast.Name) and v.value.id == "self":
        return v.attr
    return None


def late_wiring(source: str) -> list[tuple[int, str]]:
    found = []
    for node in tree.walk(source):
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AnnAssign | ast.AugAssign):
            targets = [node.target]
        else:
            continue
        for t in targets:
            if _holder(t) in COMPONENTS:
                found.append((node.lineno, ast.unparse(t)))
    return found


def test_no_component_assigns_another_components_attributes():
    found = [
        f"{path.relative_to(ROOT.parent)}:{line}: {what}"
        for path in sorted(ROOT.rglob("*.py"))
        for line, what in late_wiring(path.read_text(encoding="utf-8"))
    ]
    assert found == []


def test_the_check_sees_late_wiring():
    src = (
        "def build(store, agent):\n"
        "    store.token_counter = agent.count\n"
        "class D:\n"
        "    def stop(self):\n"
        "        self.conversation.accepting = False\n"
        "        self.accepting = False\n"  # its own field: fine
        "        msg.text = ''\n"  # a value, not a component: fine
    )
    assert late_wiring(src) == [(2, "store.token_counter"), (5, "self.conversation.accepting")]
