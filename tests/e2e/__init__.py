"""End-to-end tests: the real daemon against the wire fakes (ARCHITECTURE.md, tests/e2e/).

The shared harness lives in :mod:`tests.e2e.harness`; its names are importable from here too
(``from tests.e2e import make_config, running``), as they were before the folder existed."""

from tests.e2e.harness import (
    LONG_ANSWER,
    TG_TOKEN,
    all_text,
    assert_long_answer_delivered,
    config_file,
    deep_merge,
    eventually,
    make_config,
    running,
    system_prompt,
    telegram_section,
)

__all__ = [
    "LONG_ANSWER",
    "TG_TOKEN",
    "all_text",
    "assert_long_answer_delivered",
    "config_file",
    "deep_merge",
    "eventually",
    "make_config",
    "running",
    "system_prompt",
    "telegram_section",
]
