"""``bot.config.tools.BUILTIN_TOOLS`` names the registry's built-in tools, so the config check
(which `chela run` makes before its first poll) needs no import of the tools themselves."""

from __future__ import annotations

import subprocess
import sys

from bot.agent.tools import builtin_tools
from bot.cli.validate import tool_warnings
from bot.config import parse_config
from bot.config.tools import BUILTIN_TOOLS


def test_the_names_are_the_registry_s():
    assert sorted(BUILTIN_TOOLS) == sorted(builtin_tools())


def test_a_typo_is_named_and_every_real_tool_is_not():
    cfg = parse_config({"tools": {"enabled": [*BUILTIN_TOOLS, "web_fetch", "raed"]}})
    warnings = tool_warnings(cfg)
    assert len(warnings) == 1 and "unknown tool 'raed'" in warnings[0]


def test_checking_the_config_imports_no_tool():
    code = (
        "import sys; from bot.config import parse_config; from bot.cli.validate import validate;"
        "validate(parse_config({})); print('bot.agent.tools' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
