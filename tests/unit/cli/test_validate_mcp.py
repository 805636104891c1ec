"""`chela check` (and `chela run`, through the same verdict) warns about an MCP server's
enabled_tools/disabled_tools entry that cannot match (issue 27, "MCP as people meet it")."""

from __future__ import annotations

from bot.cli.validate import validate
from bot.config import parse_config


def config(disabled: list[str]):
    return parse_config(
        {
            "agent": {"model": "openai/fake-model", "api_base": "http://127.0.0.1:9/v1"},
            "mcp": {
                "servers": [
                    {"name": "fs", "command": "true", "disabled_tools": disabled},
                    {"name": "git", "command": "true"},
                ]
            },
        }
    )


def test_an_entry_naming_another_servers_tool_is_a_warning():
    v = validate(config(["git__git_commit"]))
    assert not v.errors
    [w] = [w for w in v.warnings if "git__git_commit" in w]
    assert "names a tool of server 'git'" in w


def test_twin_the_servers_own_and_prefixed_names_pass_without_a_warning():
    v = validate(config(["write_file", "fs__read_file"]))
    assert not v.errors
    assert not [w for w in v.warnings if "mcp.servers" in w]
