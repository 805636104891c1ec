"""Several agents and several channel accounts in one daemon: ``[agents.<id>]`` tables, the
``accounts`` of a channel, and the pure views the rest of Chela reads them through.

* ``AgentOverrides`` (bot/config/agent.py) -- one ``[agents.<id>]`` table: any key of
  ``[agent]`` (except ``id`` and ``state_dir``) and its own ``tools``/``heartbeat`` tables; what
  it does not set is taken from the top level, key by key (nested tables too).
* :func:`agent_ids`, :func:`agent_config` -- the agents, and one agent's whole config.
* :func:`channel_accounts` -- a channel's accounts, each merged over the channel's own table.
* :func:`config_errors` -- what the schema alone cannot see (run by the loader, so
  ``chela check`` and ``chela run`` refuse the same configs with the same words).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel

from channels.base import DEFAULT_ACCOUNT  # the channel's own table, [channels.<name>]

from .agent import AgentConfig
from .bindings import binding_errors
from .channels import MESSAGING, ChannelPolicy
from .schema import Config

NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
NAME_RULE = "use letters, digits, '-' or '_' (at most 64)"


M = TypeVar("M", bound=BaseModel)


def merged(base: M, over: M) -> M:
    """``base`` with every key ``over`` sets replaced; a nested table that both have is merged
    the same way (a key the nested table does not set keeps ``base``'s value)."""
    update = {}
    for key in over.model_fields_set:
        mine, theirs = getattr(over, key), getattr(base, key)
        if isinstance(mine, BaseModel) and type(mine) is type(theirs):
            update[key] = merged(theirs, mine)
        else:
            update[key] = mine
    return base.model_copy(update=update)


def agent_ids(cfg: Config) -> list[str]:
    """The default agent's id first, then each ``[agents.<id>]`` in file order."""
    return [cfg.agent.id, *cfg.agents]


def agent_config(cfg: Config, agent_id: str) -> Config:
    """The whole config as agent ``agent_id`` sees it: its ``[agent]`` keys, tools and heartbeat
    (each taken from the top level where the agent sets nothing); the channels, state dir and
    everything else are the daemon's.  The default agent gets ``cfg`` itself.  KeyError for an
    id that is no agent."""
    if agent_id == cfg.agent.id:
        return cfg
    over = cfg.agents[agent_id]
    own = {k for k in over.model_fields_set if k in AgentConfig.model_fields}
    agent = merged(
        cfg.agent, AgentConfig.model_construct(own, **{k: getattr(over, k) for k in own})
    )
    update: dict[str, object] = {"agent": agent.model_copy(update={"id": agent_id})}
    for key in over.model_fields_set - own:
        table = getattr(over, key)
        if table is not None:
            update[key] = merged(getattr(cfg, key), table)
    return cfg.model_copy(update=update)


def channel_accounts(cfg: Config, channel: str) -> dict[str, ChannelPolicy]:
    """The enabled accounts of messaging channel ``channel``: "default" (the channel's own
    table) first, then each ``[channels.<channel>.accounts.<name>]`` merged over the channel's
    table (every key it does not set, ``allow_from`` included, is the channel's).  Empty for
    the HTTP API or an unknown name."""
    if channel not in MESSAGING:
        return {}
    return {n: a for n, a in all_accounts(cfg, channel).items() if a.enabled}


def all_accounts(cfg: Config, channel: str) -> dict[str, ChannelPolicy]:
    """Like :func:`channel_accounts`, disabled accounts included."""
    section: ChannelPolicy = getattr(cfg.channels, channel)
    out = {DEFAULT_ACCOUNT: section}
    for name, table in section.accounts.items():
        out[name] = merged(section, table).model_copy(update={"accounts": {}})
    return out


def account_toml_key(channel: str, account: str, key: str) -> str:
    """The TOML key of ``key`` in an account's table: under ``accounts.<account>`` of the
    channel's section, or the section's own key for "default"."""
    if account == DEFAULT_ACCOUNT:
        return f"channels.{channel}.{key}"
    return f"channels.{channel}.accounts.{account}.{key}"


# -- the checks the schema alone cannot make ----------------------------------------------


def config_errors(cfg: Config) -> list[str]:
    """Every problem with agents, accounts and bindings, one ``key: message`` line each."""
    accounts = {ch: list(all_accounts(cfg, ch)) for ch in MESSAGING}
    out = agent_errors(cfg) + workspace_errors(cfg) + account_errors(cfg)
    out += binding_errors(cfg.bindings, agent_ids(cfg), accounts)
    ids = agent_ids(cfg)
    for i, job in enumerate(cfg.cron):
        if job.agent and job.agent not in ids:
            out.append(f"cron[{i}].agent: unknown agent {job.agent!r} (agents: {', '.join(ids)})")
    return out


def agent_errors(cfg: Config) -> list[str]:
    out = []
    for name, over in cfg.agents.items():
        key = f"agents.{name}"
        if not NAME.fullmatch(name):
            out.append(f"{key}: an agent's id is its table name: {NAME_RULE}")
        if name == cfg.agent.id:
            out.append(
                f"{key}: {name!r} is the default agent's id ([agent]); give this agent another "
                "name, or another id to the default agent (agent.id)"
            )
        if "id" in over.model_fields_set:
            out.append(f"{key}.id: an agent's id is its table name ({name!r}); remove this key")
        if "state_dir" in over.model_fields_set:
            out.append(
                f"{key}.state_dir: the state dir is the daemon's, one for every agent; "
                "set it in [agent] only"
            )
        if "workspace" not in over.model_fields_set:
            out.append(f"{key}.workspace: required: each agent has a workspace of its own")
    return out


def workspace_errors(cfg: Config) -> list[str]:
    """Two agents whose workspaces are the same folder, or one inside the other."""
    seen: list[tuple[str, Path]] = [("agent.workspace", _real(cfg.agent.workspace))]
    out = []
    for name, over in cfg.agents.items():
        if "workspace" not in over.model_fields_set:
            continue
        key, here = f"agents.{name}.workspace", _real(over.workspace)
        for other, there in seen:
            if here == there:
                how = "is the same folder as"
            elif there in here.parents:
                how = "is inside"
            elif here in there.parents:
                how = "contains"
            else:
                continue
            out.append(
                f"{key}: {here} {how} {other} ({there}); each agent needs a workspace of its "
                "own, neither shared nor nested"
            )
        seen.append((key, here))
    return out


def _real(path: Path) -> Path:
    return path.expanduser().resolve()


def account_errors(cfg: Config) -> list[str]:
    """Bad account names, and two enabled accounts of a channel on one connection (the same
    token variable, or for Signal the same number)."""
    out = []
    for ch in MESSAGING:
        section: ChannelPolicy = getattr(cfg.channels, ch)
        for name, table in section.accounts.items():
            key = f"channels.{ch}.accounts.{name}"
            if name == DEFAULT_ACCOUNT:
                out.append(
                    f"{key}: the account {DEFAULT_ACCOUNT!r} is the channel's own table "
                    f"[channels.{ch}]; give this account another name"
                )
            elif not NAME.fullmatch(name):
                out.append(f"{key}: {NAME_RULE}")
            if table.accounts:
                out.append(f"{key}.accounts: an account has no accounts of its own")
        out += _shared_connections(ch, channel_accounts(cfg, ch))
    return out


def _shared_connections(channel: str, accounts: dict[str, ChannelPolicy]) -> list[str]:
    out = []
    owner: dict[tuple[str, str], str] = {}  # (key, value) -> the first account using it
    for name, acct in accounts.items():
        for key, value in acct.connection().items():
            first = owner.setdefault((key, value), name)
            if first != name:
                out.append(
                    f"{account_toml_key(channel, name, key)}: {value} is also "
                    f"{account_toml_key(channel, first, key)} (account {first!r}); each account "
                    "connects with its own"
                )
    return out
