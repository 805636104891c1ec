"""The turn's collaborators from modules bot.agent.turn does not import at its own import
(bot.agent.lazy): importing the agent still leaves the loop, the media package and the
prompt hooks unloaded (a CLI command that only builds an agent does not pay for them), and
a turn gets the real ones, looked up once."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from bot.agent import loop
from bot.agent.lazy import turn_parts
from bot.agent.tools import ToolContext
from bot.agent.tools.session import with_origin
from bot.media import policy_for
from bot.prompt import hooks

ROOT = Path(__file__).resolve().parents[3]


def test_importing_the_agent_leaves_the_loop_unloaded():
    code = (
        "import sys, bot.agent.turn\n"
        "late = {'bot.agent.loop', 'bot.media', 'bot.prompt.hooks'} & set(sys.modules)\n"
        "print(sorted(late))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"


def test_a_turn_gets_the_real_collaborators_once():
    parts = turn_parts()
    assert parts == (
        loop.run_agent_loop,
        policy_for,
        hooks.apply_system,
        hooks.apply_user,
        ToolContext,
        with_origin,
    )
    assert turn_parts() is parts
