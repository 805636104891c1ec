"""The secrets registry.

Every value the config takes from the environment is a secret: the variables named by
``*_env`` keys, the ``${VAR}`` references in an MCP server's ``env``, and every
``*_API_KEY`` variable (litellm reads a provider's key from one when ``agent.api_key_env``
is empty).  The config loader collects them into one :class:`Secrets` per config, and that
one object feeds everything that must keep them in:

* the scrubber (``channels/redact.py``): tool output and model errors, the log handler,
  and everything the CLI prints;
* exec's environment filter (:meth:`Secrets.child_env`): a command never inherits a
  variable the config names, nor one whose value is a secret.

Part of the config package, the bottom of ``bot/``: ``parse_config`` fills it (it calls
:func:`collect` with :func:`env_names`), and the agent, the CLI and exec read it without
importing each other.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping

from pydantic import BaseModel

MIN_SECRET = 4  # shorter values are not scrubbed (they would match everywhere)
MIN_PROVIDER_KEY = 8  # a short *_API_KEY ("none", "test") is a placeholder, not a key
_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def references(text: str) -> list[str]:
    """The variable names ``text`` refers to as ``${VAR}``."""
    return _REF.findall(text or "")


def expand(text: str, environ: Mapping[str, str] | None = None) -> str:
    """``text`` with each ``${VAR}`` replaced by the variable's value ("" when unset)."""
    env = os.environ if environ is None else environ
    return _REF.sub(lambda m: env.get(m[1], ""), text)


def is_provider_key(name: str) -> bool:
    return name.upper().endswith("_API_KEY")


class Secrets(tuple[str, ...]):
    """The secret values (each at least ``MIN_SECRET`` characters, longest first), and in
    ``names`` the environment variables the config reads them from.

    A tuple, so it goes wherever a list of secret values is taken (the scrubber, the
    model client, ``ToolContext.secrets``)."""

    names: frozenset[str]

    def __new__(cls, values: Iterable[str] = (), names: Iterable[str] = ()) -> Secrets:
        kept = sorted({v for v in values if v and len(v) >= MIN_SECRET}, key=lambda v: (-len(v), v))
        self = super().__new__(cls, kept)
        self.names = frozenset(n for n in names if n)
        return self

    def plus(self, values: Iterable[str]) -> Secrets:
        """The same registry with more values (secrets Chela keeps in files, such as the
        generated HTTP token)."""
        return Secrets((*self, *values), self.names)

    def child_env(self, environ: Mapping[str, str] | None = None) -> dict[str, str]:
        """``environ`` (the daemon's environment) for a child process: without every variable
        the config names, every ``*_API_KEY`` variable, and every variable whose value is a
        secret."""
        env = os.environ if environ is None else environ
        values = set(self)
        return {
            k: v
            for k, v in env.items()
            if k not in self.names and not is_provider_key(k) and v not in values
        }


def _field_names(key: str, value: object) -> list[str] | None:
    """The variables one field names: a ``*_env`` string or mapping, an ``env`` mapping's
    ``${VAR}`` references; None for a field to walk into."""
    if key.endswith("_env") and isinstance(value, str):
        return [value]
    if key.endswith("_env") and isinstance(value, dict):
        return [v for v in value.values() if isinstance(v, str)]
    if key == "env" and isinstance(value, dict):
        return [r for v in value.values() for r in references(str(v))]
    return None


def env_names(config: object) -> list[str]:
    """Every environment variable ``config`` (a pydantic model) takes a value from: the value
    of each ``*_env`` field anywhere in it (a mapping such as ``headers_env`` gives its
    values), and each ``${VAR}`` in the values of an ``env`` mapping (an MCP server's)."""
    names: list[str] = []

    def walk(node: object) -> None:
        if isinstance(node, BaseModel):
            for key in type(node).model_fields:
                value = getattr(node, key)
                found = _field_names(key, value)
                if found is None:
                    walk(value)
                else:
                    names.extend(found)
        elif isinstance(node, (list, tuple)):
            for item in node:
                walk(item)
        elif isinstance(node, Mapping):  # [agents.<id>], a channel's accounts, [agent.models]
            for item in node.values():
                walk(item)

    walk(config)
    return [n for n in dict.fromkeys(names) if n]


def collect(names: Iterable[str], environ: Mapping[str, str] | None = None) -> Secrets:
    """The registry for a config whose secrets come from the variables ``names``: their
    values as they are now, plus every ``*_API_KEY`` variable of the environment."""
    env = os.environ if environ is None else environ
    named = [n for n in dict.fromkeys(names) if n]
    providers = [k for k in sorted(env) if is_provider_key(k) and k not in named]
    values = [env.get(n, "") for n in named]
    values += [env[k] for k in providers if len(env[k]) >= MIN_PROVIDER_KEY]
    secrets = Secrets(values, (*named, *providers))
    _LOADED.update(secrets)
    return secrets


# Every secret value of every config loaded in this process: what the CLI's output filter
# redacts (a command may load more than one config, e.g. `chela onboard` checks the one it
# wrote).  Values are only ever added.
_LOADED: set[str] = set()


def loaded() -> tuple[str, ...]:
    return tuple(_LOADED)
