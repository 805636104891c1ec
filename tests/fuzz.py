"""Junk-field fuzzing for the pure translators: every leaf and branch of a rich platform
document is replaced, one at a time, by each junk value; a translator must never raise."""

from __future__ import annotations

import copy
from typing import Any

JUNK: list[Any] = [
    None,
    True,
    False,
    0,
    -1,
    2**70,
    1.5,
    float("nan"),
    float("inf"),
    "",
    "x",
    "²",
    [],
    [1, "a", None],
    {},
    {"a": {}},
]


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every key path inside nested dicts and lists (the root excluded)."""
    out = [prefix] if prefix else []
    if isinstance(value, dict):
        for k, v in value.items():
            out += paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += paths(v, (*prefix, i))
    return out


def replace(doc: Any, path: tuple[Any, ...], value: Any) -> Any:
    """A deep copy of ``doc`` with the node at ``path`` replaced by ``value``."""
    doc = copy.deepcopy(doc)
    node = doc
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return doc
