"""Prices and context windows from litellm's bundled price table, read as data.

The table is the JSON file litellm ships (``model_prices_and_context_window_backup.json``
inside the installed package); it is found with ``importlib.util.find_spec``, which locates
the package without importing it, and parsed once per process.  Only the few numbers Chela
uses are kept (the whole table is ~2.4 MB of JSON).
"""

from __future__ import annotations

import importlib.util
import json
import logging
import threading
from dataclasses import dataclass
from pathlib import Path

from bot import fs

log = logging.getLogger(__name__)

TABLE_NAME = "model_prices_and_context_window_backup.json"
TABLE_MAX = 64 * 1024 * 1024  # the price table read at most (about 2.4 MB today)

Prices = tuple[float, float, float, float]  # per token: in, out, cache read, cache write


@dataclass(frozen=True)
class ModelInfo:
    provider: str
    prices: Prices | None  # None when the table has no price for the model
    window: int  # input tokens; 0 when unknown
    reasoning: bool = False  # accepts reasoning_effort
    vision: bool = False  # accepts images


_table: dict[str, ModelInfo] | None = None
_lock = threading.Lock()


def table_path() -> Path | None:
    """Where the installed litellm keeps its price table (litellm is not imported)."""
    try:
        spec = importlib.util.find_spec("litellm")
    except (ImportError, ValueError):
        return None
    for folder in (spec.submodule_search_locations or []) if spec else []:
        path = Path(folder) / TABLE_NAME
        if path.is_file():
            return path
    return None


def _num(entry: dict, key: str) -> float:
    v = entry.get(key)
    return float(v) if isinstance(v, (int, float)) and v >= 0 else 0.0


def _info(entry: dict) -> ModelInfo:
    inp, out = _num(entry, "input_cost_per_token"), _num(entry, "output_cost_per_token")
    prices: Prices | None = None
    if inp or out:
        prices = (
            inp,
            out,
            _num(entry, "cache_read_input_token_cost") or inp,
            _num(entry, "cache_creation_input_token_cost") or inp,
        )
    window = 0
    for k in ("max_input_tokens", "max_tokens"):
        v = entry.get(k)
        if isinstance(v, int) and v > 0:
            window = v
            break
    provider = str(entry.get("litellm_provider") or "")
    return ModelInfo(
        provider,
        prices,
        window,
        entry.get("supports_reasoning") is True,
        entry.get("supports_vision") is True,
    )


def loaded() -> bool:
    return _table is not None


def load() -> dict[str, ModelInfo]:
    """The table (parsed on first use; blocking, ~0.1 s: call it from a thread early)."""
    global _table  # noqa: PLW0603 - one parsed table per process
    if _table is not None:
        return _table
    with _lock:
        if _table is None:
            parsed: dict[str, ModelInfo] = {}
            path = table_path()
            try:
                raw = json.loads(fs.read_in(path, TABLE_MAX)) if path else {}
            except (OSError, ValueError) as e:
                log.warning("litellm's price table could not be read (%s): costs count as 0", e)
                raw = {}
            for name, entry in raw.items():
                if isinstance(entry, dict):
                    parsed[name] = _info(entry)
            _table = parsed
    return _table


def model_info(model: str, provider: str = "") -> ModelInfo | None:
    """The table's entry for ``model`` (without its provider prefix) served by ``provider``:
    ``provider/model`` first, then ``model`` when the table says that provider serves it."""
    table = load()
    if provider:
        found = table.get(f"{provider}/{model}")
        if found is not None:
            return found
    found = table.get(model)
    if found is not None and (not provider or found.provider == provider):
        return found
    return None


def context_window(model: str) -> int:
    """Input tokens of a model string (``provider/model`` or a bare name); 0 when unknown."""
    provider, _, name = model.partition("/")
    info = model_info(name, provider) if name else model_info(model)
    return info.window if info else 0


def supports_vision(model: str) -> bool | None:
    """Whether the table says the model takes images; None when it does not know it."""
    provider, _, name = model.partition("/")
    info = model_info(name, provider) if name else model_info(model)
    return info.vision if info else None
