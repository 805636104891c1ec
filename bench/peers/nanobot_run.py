"""Run nanobot's gateway against the bench's FakeTelegram (not a test; nanobot's own venv).

    /tmp/nb/bin/python bench/peers/nanobot_run.py CONFIG.json FAKE_TELEGRAM_ROOT

nanobot 0.3.5 has no setting for the Bot API's address, so this sets python-telegram-bot's
``base_url`` on every ``ApplicationBuilder`` before nanobot builds its application; nothing
else of nanobot is changed.  Its model goes to the fake LLM through its ``custom``
(OpenAI-compatible) provider, written in CONFIG.json by ``bench/run_bench.py``.
"""

from __future__ import annotations

import sys

import telegram.ext

CONFIG, ROOT = sys.argv[1], sys.argv[2].rstrip("/")
_build = telegram.ext.ApplicationBuilder.build


def _build_on_the_fake(self):  # type: ignore[no-untyped-def]
    self.base_url(f"{ROOT}/bot")
    self.base_file_url(f"{ROOT}/file/bot")
    return _build(self)


telegram.ext.ApplicationBuilder.build = _build_on_the_fake  # type: ignore[method-assign]

from nanobot.cli.entry import main  # noqa: E402

sys.argv = ["nanobot", "gateway", "--config", CONFIG, "--foreground"]
main()
