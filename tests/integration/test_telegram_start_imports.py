"""`chela run` with Telegram does not import httpx's command-line client (click, rich,
pygments: ~100 modules and half of python-telegram-bot's import time) that PTB's httpx
import would otherwise pull in (issue 28, start-up); httpx itself still works."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import sys
import channels.telegram
import httpx
print(sys.modules.get("httpx._main") is None, "rich" in sys.modules, callable(httpx.main),
      httpx.URL("http://127.0.0.1/x").path)
"""


def test_the_telegram_channel_leaves_httpx_cli_unimported():
    out = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    assert out == ["True", "False", "True", "/x"]
