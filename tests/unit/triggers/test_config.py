"""[[hooks]] and [[mail]] config errors name the key; the legitimate twins load."""

from __future__ import annotations

import pytest

from bot.config import parse_config
from bot.config.load import ConfigError

HTTP = {"channels": {"http": {"enabled": True}}}


def load(**extra):
    return parse_config({**HTTP, **extra})


def hook(**kw):
    return {"name": "gh", "scheme": "github", "secret_env": "T_HOOK", **kw}


def box(**kw):
    base = {"name": "in", "host": "imap.x.org", "username_env": "T_U", "password_env": "T_P"}
    return {**base, **kw}


@pytest.fixture(autouse=True)
def env(monkeypatch):
    for k in ("T_HOOK", "T_U", "T_P"):
        monkeypatch.setenv(k, "v")


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"hooks": [hook(scheme="nope")]}, r"hooks\[0\]\.scheme"),
        ({"hooks": [hook(name="Bad Name")]}, r"hooks\[0\]\.name"),
        ({"hooks": [hook(), hook()]}, r"hooks\[1\]\.name: 'gh' is used"),
        ({"hooks": [hook(scheme="hmac")]}, r"hooks\[0\]\.header"),
        ({"hooks": [hook(agent="ghost")]}, r"hooks\[0\]\.agent: unknown agent"),
        ({"hooks": [hook(tools=["exec", "nope"])]}, r"hooks\[0\]\.tools: 'nope'"),
        ({"hooks": [hook(deliver="telegram")]}, r"hooks\[0\]\.deliver"),
        ({"hooks": [hook(tolerance="0s")]}, r"hooks\[0\]\.tolerance"),
        ({"hooks": [hook(deliver="slack:C1")]}, r"hooks\[0\]\.deliver: channel 'slack'"),
        ({"mail": [box(deliver="nope:1")]}, r"mail\[0\]\.deliver: channel 'nope'"),
        ({"mail": [box(tls="none")]}, r"mail\[0\]\.tls: 'none'"),
        ({"mail": [box(password_env="T_UNSET")]}, r"mail\[0\]\.password_env: .*T_UNSET"),
    ],
)
def test_errors_name_the_key(extra, message):
    with pytest.raises(ConfigError, match=message):
        load(**extra)


def test_hooks_without_the_http_channel_is_an_error():
    with pytest.raises(ConfigError, match=r"hooks\[0\]: .*\[channels\.http\]"):
        parse_config({"hooks": [hook()]})


def test_the_twins_load():
    cfg = load(
        hooks=[
            hook(tools=["exec"]),
            hook(name="h2", scheme="hmac", header="X-Sig", deliver="http:some-user"),
        ],
        mail=[box(), box(name="local", host="127.0.0.1", tls="none", from_allow=["@X.org"])],
    )
    assert [h.name for h in cfg.hooks] == ["gh", "h2"]
    assert cfg.mail[1].from_allow == ["@x.org"]
    assert {"T_HOOK", "T_U", "T_P"} <= set(cfg.secret_env_names())  # redacted from logs


def test_a_hook_secret_equal_to_the_api_token_is_an_error_and_its_own_secret_loads(monkeypatch):
    monkeypatch.setenv("T_API", "v")  # the hook's T_HOOK is "v" too
    http = {"channels": {"http": {"enabled": True, "token_env": "T_API"}}}
    with pytest.raises(ConfigError, match=r"hooks\[0\]\.secret_env: the same secret as"):
        parse_config({**http, "hooks": [hook()]})
    monkeypatch.setenv("T_API", "another-token")
    assert parse_config({**http, "hooks": [hook()]}).hooks[0].name == "gh"


def test_a_standard_secret_that_is_not_base64_is_an_error_and_a_good_one_loads(monkeypatch):
    monkeypatch.setenv("T_HOOK", "whsec_not base64!")
    with pytest.raises(ConfigError, match=r"hooks\[0\]\.secret_env: T_HOOK .* not base64"):
        load(hooks=[hook(scheme="standard")])
    monkeypatch.setenv("T_HOOK", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
    assert load(hooks=[hook(scheme="standard")]).hooks[0].scheme == "standard"
