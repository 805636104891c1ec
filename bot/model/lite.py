"""litellm, imported only when needed (it costs ~2.3 s and ~160 MB).

:func:`warm_up` (from a thread at start-up) pays that early.  ``_litellm`` is the module
once imported (``None`` before): read it here, where it is assigned, never a copy of it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from typing import Any

_litellm: Any = None
_import_lock = threading.Lock()
_HTTP_HANDLER_ENV = "EXPERIMENTAL_OPENAI_BASE_LLM_HTTP_HANDLER"


def _load_litellm() -> Any:
    global _litellm  # noqa: PLW0603 - one lazily imported module per process
    if _litellm is not None:
        return _litellm
    with _import_lock:
        if _litellm is None:
            os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
            # OpenAI-compatible providers: litellm's own HTTP handler instead of the openai SDK
            # client.  The SDK re-validates every request body against its TypedDicts (the
            # system prompt, history and tool schemas, every turn); measured with
            # bench/turn_bench.py that was 4.7 of 5.7 ms of CPU per call, and 1.9 ms with the
            # handler.  Same wire format; set the variable to "false" to go back.
            os.environ.setdefault(_HTTP_HANDLER_ENV, "true")
            import litellm

            litellm.suppress_debug_info = True
            for attr, value in (("telemetry", False), ("set_verbose", False)):
                if hasattr(litellm, attr):
                    with contextlib.suppress(Exception):
                        setattr(litellm, attr, value)
            logging.getLogger("LiteLLM").setLevel(logging.WARNING)
            _litellm = litellm
    return _litellm


def warm_up() -> None:
    """Import litellm now (blocking; run it in a thread, e.g. ``asyncio.to_thread(warm_up)``)."""
    _load_litellm()
