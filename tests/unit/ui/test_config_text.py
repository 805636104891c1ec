"""The Config page's text helpers: a form key set in the TOML text keeps the rest of the file,
a secret where a variable's name belongs is refused without being repeated, verdict lines are
found by key, and the keys that differ from the running config are listed."""

from __future__ import annotations

import tomllib

import pytest

from bot.config import Config, parse_config
from bot.ui import config_text as ct

FILE = """# my assistant
[agent]
model = "openai/a"   # the model
api_base = "http://127.0.0.1:1/v1"

[channels.http]
enabled = false # off for now
"""


def field(path: str) -> ct.FormField:
    return ct.BY_PATH[path]


@pytest.mark.parametrize(
    ("path", "value", "expect_line"),
    [
        ("agent.model", "openai/b", 'model = "openai/b"  # the model'),  # replaced, comment kept
        ("channels.http.enabled", True, "enabled = true  # off for now"),
        ("agent.timezone", "Europe/Paris", 'timezone = "Europe/Paris"'),  # added to [agent]
        ("ui.read_only", True, "read_only = true"),  # a new [ui] table
        ("agent.daily_cost_limit_usd", 2.5, "daily_cost_limit_usd = 2.5"),
        ("agent.model", 'quote " and # hash', 'model = "quote \\" and # hash"  # the model'),
    ],
)
def test_set_key_writes_the_value_and_keeps_the_rest(path, value, expect_line):
    out = ct.set_key(FILE, field(path), value)
    assert expect_line in out.splitlines()
    assert ct.value_at(tomllib.loads(out), path) == value
    assert out.startswith("# my assistant\n[agent]\n")
    rest = [ln for ln in FILE.splitlines() if not ln.startswith(path.rsplit(".", 1)[1])]
    assert all(ln in out.splitlines() for ln in rest)


def test_a_key_written_another_way_is_left_to_the_raw_editor():
    dotted = 'agent.model = "openai/a"\n'
    with pytest.raises(ct.FormError, match="agent.model"):
        ct.set_key(dotted, field("agent.model"), "openai/b")


@pytest.mark.parametrize(
    ("path", "value"),
    [
        ("agent.model", "two\nlines"),
        ("channels.http.enabled", "yes"),
        ("agent.daily_cost_limit_usd", "2"),
        ("agent.daily_cost_limit_usd", True),
    ],
)
def test_a_value_of_the_wrong_type_is_refused_by_key(path, value):
    with pytest.raises(ct.FormError, match=path.replace(".", r"\.")):
        ct.set_key(FILE, field(path), value)


def test_apply_form_refuses_a_key_not_in_the_form():
    with pytest.raises(ct.FormError, match="agent.workspace"):
        ct.apply_form(FILE, {"agent.workspace": "/"})
    assert 'model = "openai/z"' in ct.apply_form(FILE, {"agent.model": "openai/z"})


def test_every_form_key_is_a_config_key():
    cfg = Config()
    for f in ct.FORM:
        parent = ct.value_at(cfg, f.section)
        assert parent is not None and f.key in type(parent).model_fields, f.path


SECRET = "sk-proj-AbC123-real-secret"


@pytest.mark.parametrize(
    ("data", "key"),
    [
        ({"agent": {"api_key_env": SECRET}}, "agent.api_key_env"),
        (
            {"channels": {"telegram": {"token_env": "123456:AAE-token"}}},
            "channels.telegram.token_env",
        ),
        (
            {"agent": {"fallbacks": [{"model": "x", "api_key_env": SECRET}]}},
            "agent.fallbacks[0].api_key_env",
        ),
        (
            {"mcp": {"servers": [{"name": "m", "headers_env": {"X-Key": SECRET}}]}},
            "mcp.servers[0].headers_env.X-Key",
        ),
    ],
)
def test_a_secret_where_a_variable_name_belongs_is_named_never_repeated(data, key):
    problems = ct.env_problems(data)
    assert [k for k, _ in problems] == [key]
    assert all(SECRET not in m for _, m in problems)


def test_variable_names_and_empty_values_pass():
    data = {"agent": {"api_key_env": "OPENAI_API_KEY"}, "channels": {"http": {"token_env": ""}}}
    assert ct.env_problems(data) == []


@pytest.mark.parametrize(
    ("line", "key"),
    [
        ("agent.model = 'x': litellm cannot route this model string", "agent.model"),
        (
            "channels.telegram.token_env: environment variable T is empty",
            "channels.telegram.token_env",
        ),
        (
            "agent.fallbacks[1].api_key_env: environment variable K is empty",
            "agent.fallbacks[1].api_key_env",
        ),
        ("ui.session_idel: unknown key", "ui.session_idel"),
        ("the config has a problem", ""),
    ],
)
def test_verdict_lines_by_key(line, key):
    assert ct.by_key(line) == (key, line)


def test_changed_keys_are_the_ones_that_differ():
    a = parse_config({"agent": {"model": "openai/a"}})
    b = parse_config({"agent": {"model": "openai/b"}, "heartbeat": {"every": "1h"}})
    dump = {"mode": "json"}
    assert ct.changed_keys(a.model_dump(**dump), a.model_dump(**dump)) == []
    assert ct.changed_keys(a.model_dump(**dump), b.model_dump(**dump)) == [
        "agent.model",
        "heartbeat.every",
    ]
