"""The one verdict on a config that ``chela check``, ``chela run`` and ``chela doctor`` share
(issue 27 #3): the errors that make ``check`` exit 1 and ``run`` refuse to start, and the
warnings both report, each in the same words.

A model string is judged without importing litellm (~2 s) when its provider prefix is one
of the common ones; only an unusual string asks litellm itself."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypeVar

from bot.config import (
    DEFAULT_ACCOUNT,
    AgentConfig,
    Config,
    ToolsConfig,
    account_toml_key,
    agent_config,
    agent_ids,
    channel_accounts,
    config_warnings,
)
from bot.config.providers import known_prefix, missing_key_var

Row = TypeVar("Row", bound=tuple[str, ...])

# web_search/web_fetch/browser are built from their own config sections (the browser joins
# owner turns by [tools.browser] enabled alone); <server>__<tool> names are MCP tools
_CONFIG_TOOLS = ("web_search", "web_fetch", "browser")


@dataclass
class Verdict:
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def validate(cfg: Config) -> Verdict:
    """Everything wrong with ``cfg`` that can be told without the network."""
    v = Verdict(warnings=config_warnings(cfg))
    v.errors += secret_errors(cfg)
    v.errors += model_errors(cfg)
    v.errors += extra_errors(cfg)
    for level, line in key_problems(cfg):
        (v.errors if level == "error" else v.warnings).append(line)
    v.warnings += tool_warnings(cfg) + binding_warnings(cfg)
    if cfg.mcp.servers:  # the MCP package is imported only for a config that has servers
        from bot.mcp.diagnose import disabled_tools_warnings

        v.warnings += disabled_tools_warnings(cfg)
    return v


def extra_errors(cfg: Config) -> list[str]:
    """An enabled account whose settings need a module that is not importable (an optional
    extra, or a system library it loads), as its section says (``needs``)."""
    import importlib

    from bot.config.channels import MESSAGING

    out = []
    for name in MESSAGING:
        for account, section in channel_accounts(cfg, name).items():
            if (need := section.needs()) is None:
                continue
            key, module, extra = need
            try:
                importlib.import_module(module)
            except (ImportError, OSError) as e:
                out.append(
                    f"{account_toml_key(name, account, key)} = {getattr(section, key)!r} needs "
                    f"{module.partition('.')[0]} ({e}): pip install 'chela[{extra}]'"
                )
    return out


def secret_problems(cfg: Config) -> list[tuple[str, str, str]]:
    """An enabled channel's empty secret variable, as ``(channel, problem, fix)``."""
    from bot.app.channels import MESSAGING

    out: list[tuple[str, str, str]] = []
    for name in MESSAGING:
        for account, section in channel_accounts(cfg, name).items():
            for key, env in section.required_secrets().items():
                if not cfg.secret(env):
                    what = "channel" if account == DEFAULT_ACCOUNT else "account"
                    out.append(
                        (
                            name if account == DEFAULT_ACCOUNT else f"{name}:{account}",
                            (
                                f"{account_toml_key(name, account, key)}: environment variable "
                                f"{env or '(unset)'} is empty and the {what} is enabled"
                            ),
                            f"export {env}=... (or set "
                            f"{account_toml_key(name, account, 'enabled')} = false)",
                        )
                    )
    h = cfg.channels.http
    if h.enabled and h.token_env and not cfg.secret(h.token_env).strip():
        out.append(
            (
                "http",
                f"channels.http.token_env: environment variable {h.token_env} is empty",
                f'export {h.token_env}=..., or set token_env = "" to use a generated token file',
            )
        )
    return out


def secret_errors(cfg: Config) -> list[str]:
    return [f"{problem}: {fix}" for _, problem, fix in secret_problems(cfg)]


def agents(cfg: Config) -> list[tuple[str, AgentConfig]]:
    """Each agent's ``[agent]`` keys (its own, or inherited) as ``(its table, keys)``:
    ``agent`` for the default agent, ``agents.<id>`` for the others."""
    out = [("agent", cfg.agent)]
    out += [(f"agents.{i}", agent_config(cfg, i).agent) for i in agent_ids(cfg)[1:]]
    return out


def once(rows: list[Row]) -> list[Row]:
    """``rows`` without a row whose values (all but the key) an earlier row has: an agent
    that inherits a model from [agent] is judged under [agent]'s key only."""
    seen: set[tuple[str, ...]] = set()
    out = []
    for row in rows:
        if row[1:] not in seen:
            seen.add(row[1:])
            out.append(row)
    return out


def model_strings(cfg: Config) -> list[tuple[str, str, str]]:
    """Every model string of the config as ``(TOML key, model, api_base)``."""
    out: list[tuple[str, str, str]] = []
    for t, a in agents(cfg):
        out.append((f"{t}.model", a.model, a.api_base))
        out += [(f"{t}.fallbacks[{i}]", f.model, f.api_base) for i, f in enumerate(a.fallbacks)]
        if a.compaction.model:
            out.append((f"{t}.compaction.model", a.compaction.model, a.api_base))
    return once(out)


def model_errors(cfg: Config) -> list[str]:
    """Model strings litellm cannot route, one line each naming the TOML key."""
    out = []
    for key, model, base in model_strings(cfg):
        problem = model_problem(model, base)
        if problem:
            out.append(f"{key} = {model!r}: {problem}")
    return out


def model_problem(model: str, base: str = "") -> str:
    """Why litellm cannot route ``model`` ("" when it can).  A provider prefix litellm is
    known to route is judged here; only an unusual string imports litellm to ask it."""
    if known_prefix(model):
        return ""
    from bot.model import routing_error

    why = routing_error(model, base)
    if not why:
        return ""
    name = model.rsplit("/", 1)[-1] or model
    said = why.removeprefix("litellm.BadRequestError: ").split(". ")[0]
    return (
        f"litellm cannot route this model string; it needs a provider prefix, e.g. "
        f'"ollama/{name}", or "openai/{name}" with the URL of a local OpenAI-compatible '
        f"server (litellm says: {said})"
    )


def key_problems(cfg: Config) -> list[tuple[str, str]]:
    """A model key variable named but empty: an error for a provider's own API (every call
    would fail), a warning with ``api_base`` (a local server often needs no key)."""
    targets: list[tuple[str, str, str]] = []
    for t, a in agents(cfg):
        targets.append((t, a.api_key_env, a.api_base))
        targets += [
            (f"{t}.fallbacks[{i}]", f.api_key_env, f.api_base or a.api_base)
            for i, f in enumerate(a.fallbacks)
            if f.api_key_env
        ]
    out = []
    for where, env, base in once(targets):
        if env and not cfg.secret(env):
            line = (
                f"{where}.api_key_env: environment variable {env} is empty, so every model call "
                f"will fail: export {env}=..."
            )
            out.append(("warning" if base else "error", line))
    out += [("warning", line) for line in embedding_key_problems(cfg)]
    return out + [("warning", line) for line in missing_keys(cfg)]


def embedding_key_problems(cfg: Config) -> list[str]:
    """``[memory] embedding_api_key_env`` (or an agent's own) named but empty: memory search
    would fall back to words only."""
    tables = [("memory", cfg.memory)]
    tables += [(f"agents.{i}.memory", agent_config(cfg, i).memory) for i in agent_ids(cfg)[1:]]
    rows = [(t, m.embedding_api_key_env) for t, m in tables if m.embedding_model]
    return [
        f"{where}.embedding_api_key_env: environment variable {env} is empty, so memory "
        f"search will be by words only: export {env}=..."
        for where, env in once(rows)
        if env and not cfg.secret(env)
    ]


def missing_keys(cfg: Config) -> list[str]:
    """A model whose provider needs a key while neither its ``api_key_env`` nor the
    provider's own variable is set (every call would fail), naming that provider's variable."""
    targets: list[tuple[str, str, str, str]] = []
    for t, a in agents(cfg):
        targets.append((t, a.model, a.api_base, a.api_key_env))
        targets += [
            (f"{t}.fallbacks[{i}]", f.model, f.api_base or "", f.api_key_env)
            for i, f in enumerate(a.fallbacks)
        ]
    out = []
    for table, model, base, env in once(targets):
        var = "" if env else missing_key_var(model, base)
        if var:
            out.append(
                f"{table}.model = {model!r} needs an API key: neither {table}.api_key_env nor "
                f"{var} is set, so every model call will fail: export {var}=... (or name the "
                f"variable holding the key in {table}.api_key_env)"
            )
    return out


def tool_warnings(cfg: Config) -> list[str]:
    """Names in tools.enabled/tools.guest that are no tool (a typo silently loses the tool)."""
    from bot.config.tools import BUILTIN_TOOLS

    known = set(BUILTIN_TOOLS) | set(_CONFIG_TOOLS)
    tables = [("tools", cfg.tools)]
    tables += [(f"agents.{i}.tools", a.tools) for i, a in cfg.agents.items() if a.tools]
    out = []
    for where, tools in tables:
        for key in ("enabled", "guest"):
            if where != "tools" and key not in tools.model_fields_set:
                continue  # inherited from [tools]: judged there
            for name in getattr(tools, key):
                w = _tool_name_warning(where, key, str(name).strip(), tools, known)
                if w:
                    out.append(w)
    return out


def _tool_name_warning(
    where: str, key: str, n: str, tools: ToolsConfig, known: set[str]
) -> str | None:
    if n not in known and "__" not in n:
        return f"{where}.{key}: unknown tool {n!r}; ignored (known: {', '.join(sorted(known))})"
    if n == "browser" and key == "enabled" and not tools.browser.enabled:
        return (
            f"{where}.enabled lists 'browser' but {where}.browser.enabled is false, "
            f"so no browser is offered: set [{where}.browser] enabled = true"
        )
    return None


def binding_warnings(cfg: Config) -> list[str]:
    """A binding that can match nothing because its channel or account is not enabled."""
    out = []
    for i, b in enumerate(cfg.bindings):
        running = channel_accounts(cfg, b.channel)
        if b.account and b.account not in running:
            where = account_toml_key(b.channel, b.account, "enabled")
        elif not running:
            where = f"channels.{b.channel}.enabled"
        else:
            continue
        out.append(f"bindings[{i}]: matches no message while {where} is false")
    return out
