"""One agent turn: prompt (cached) + history + user turn → tool loop → reply plan.

``Agent`` is the channel-independent brain.  Channels, the heartbeat and cron all enter
through ``Agent.run_turn`` with a ``TurnRequest``; the conversation and the scheduler store
the outcome and hand the plan to delivery.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol
from collections.abc import Awaitable, Callable

from bot.agent.context import (
    MAX_USER_TEXT,
    exec_policy,
    format_user_turn,
    gather_runtime_info,
    prompt_context,
    zone,
    zone_name,
)
from bot.agent.request import TurnRequest, TurnResult
from bot.agent.tools.browser import browser_tools  # Playwright is imported on first use
from bot.config import OWNER_ONLY_TOOLS, Config
from bot.model import ON_CALL
from bot.model.gate import BudgetRefused
from bot.prompt.context import PromptContext
from bot.store import Store
from channels.base import account_key

if TYPE_CHECKING:
    from bot.agent.tools.base import Tool

log = logging.getLogger("chela.turn")

# the old import path of these names (callers move to bot.agent.request / bot.agent.context)
__all__ = [
    "MAX_USER_TEXT",
    "Agent",
    "McpTools",
    "TurnRequest",
    "TurnResult",
    "format_user_turn",
    "gather_runtime_info",
    "zone",
    "zone_name",
]


class McpTools(Protocol):
    """The port to the MCP servers: the tools they offer right now."""

    def tools(self) -> list[Tool]: ...


class Agent:
    """The channel-independent brain, built with its ports (no attribute is set from outside):

    - ``send_message``: the message tool's sender (the outbox);
    - ``approvals``: ``bot.conversation.approvals.Approvals`` for exec security "ask";
    - ``mcp``: the MCP tools (``McpManager``); its ``on_change`` should call ``refresh_tools``;
    - ``cron_api``: the cron service, or ``cron``: a callable returning it — for the cycle
      agent → cron → scheduled → agent, the cron service is built after the agent.
    """

    def __init__(
        self,
        cfg: Config,
        store: Store,
        *,
        hooks=None,
        send_message: Callable[[str, str, str], Awaitable[str]] | None = None,
        cron_api: Any = None,
        approvals: Any = None,
        mcp: McpTools | None = None,
        cron: Callable[[], Any] | None = None,
        memory: Any = None,  # bot.memory.MemoryIndex: what memory_search reads
    ):
        from bot.model import LLMClient
        from bot.prompt.cache import PromptCache

        self.cfg = cfg
        self.store = store
        self.hooks = hooks
        self.send_message = send_message
        self._cron_api = cron_api
        self._cron = cron
        self.approvals = approvals  # bot.conversation.approvals.Approvals, for exec security "ask"
        self.cache = PromptCache()
        self.mcp = mcp
        self.memory = memory
        self._web_tools = _web_tools_for(cfg)
        self._browser_tools = browser_tools(cfg)  # owner turns only, never in `extra`
        self.refresh_tools()
        self.runtime = gather_runtime_info(cfg)
        self.secrets = cfg.secrets.plus(_generated_secrets(cfg))  # the registry (bot/secrets.py)
        api_key = cfg.secret(cfg.agent.api_key_env)
        if not api_key and cfg.agent.api_base:
            api_key = "sk-local"
        self.llm = LLMClient(
            cfg.agent.model,
            api_base=cfg.agent.api_base,
            api_key=api_key,
            timeout=cfg.agent.llm_timeout_seconds,
            max_retries=cfg.agent.llm_max_retries,
            fallbacks=_fallback_targets(cfg),
            cooldown=cfg.agent.cooldown_seconds,
            secrets=self.secrets,
        )
        for target in _alias_targets(cfg):  # /model aliases with an endpoint of their own
            self.llm.add_target(target)
        from bot.agent.compaction import Compactor

        def llm_factory(model: str, *, timeout: float, max_retries: int, extra: dict | None = None):
            return LLMClient(
                model,
                api_base=cfg.agent.api_base,
                api_key=api_key,
                timeout=timeout,
                max_retries=max_retries,
                extra=extra,
            )

        self.compactor = Compactor(cfg, store, llm_factory=llm_factory, main_llm=self.llm)
        self.gate = self.compactor.gate  # every model call passes it
        self._hash_secret = cfg.secret(cfg.owner.hash_secret_env)
        # invisible to sandboxed commands besides $HOME: the state dir and the config file
        self._hidden = tuple(str(p) for p in (cfg.agent.state_dir, cfg.source) if p)
        self._exec_policy = exec_policy(cfg, self._hidden)  # every turn's: made once
        self._media_dir = cfg.media_dir

    @property
    def cron_api(self) -> Any:
        """The cron service for owner turns' cron tool, or None (cron not enabled)."""
        if self._cron is not None:
            return self._cron()
        return self._cron_api

    @cron_api.setter
    def cron_api(self, value: Any) -> None:  # old callers; prefer the constructor's ports
        self._cron_api = value

    # ------------------------------------------------------------------------- tools
    def refresh_tools(self) -> None:
        """(Re)build the owner and guest registries: built-in and web tools from the config,
        plus the MCP tools listed so far (all of them for the owner, the ones named in
        tools.guest for guests).  Called again whenever an MCP server's tool list changes;
        turns in progress keep the registries they started with."""
        from bot.agent.tools import build_registry

        cfg = self.cfg
        mcp_tools: list[Tool] = self.mcp.tools() if self.mcp is not None else []
        extra = {**self._web_tools, **{t.name: t for t in mcp_tools}}
        owner_always = [*mcp_tools, *self._browser_tools.values()]
        registry = build_registry(list(cfg.tools.enabled), extra, always=owner_always)
        # guests get tools.guest, never the owner-only tools (config validation refuses
        # them too; this keeps a hand-built Config honest)
        guest = build_registry([t for t in cfg.tools.guest if t not in OWNER_ONLY_TOOLS], extra)
        specs = {"owner": tuple(registry.specs()), "guest": tuple(guest.specs())}
        old = getattr(self, "_tool_specs", None)
        if (
            old is not None
            and _spec_keys(old) == _spec_keys(specs)
            and _spec_full(old) != _spec_full(specs)
        ):
            # only a schema changed: ToolSpec keys ignore schemas, so cached prompts would be stale
            self.cache.invalidate()
        self.registry, self.guest_registry = registry, guest
        self._tool_specs = specs

    # ------------------------------------------------------------------ prompt context
    def prompt_context(self, req: TurnRequest) -> PromptContext:
        tools = self._tool_specs[req.trust]
        tools = tools if req.tools is None else tuple(t for t in tools if t.name in req.tools)
        return prompt_context(self.cfg, req, tools, self._hash_secret, self.runtime)

    def system_prompt(self, req: TurnRequest) -> str:
        return self.cache.get(self.prompt_context(req)).text

    # -------------------------------------------------------------------------- turn
    async def run_turn(
        self, req: TurnRequest, *, on_event: Callable[[Any], None] | None = None
    ) -> TurnResult:
        """Run one turn.  ``on_event`` streams it (bot.delivery.previews.StreamEvent values): the conversation passes a live preview's callback; heartbeats and cron never do."""
        # every model call of the turn is recorded with its session and turn
        turn_id = uuid.uuid4().hex
        token = ON_CALL.set(self.gate.bind(req.trust, req.session_key, turn_id).recorder(req.kind))
        try:
            return await self._run_turn(req, turn_id, on_event)
        finally:
            ON_CALL.reset(token)

    async def compact_now(self, req: TurnRequest, focus: str = "") -> str:
        """``/compact [focus]``: compact the session now; the reply for the user.  Its
        model calls are recorded like a turn's (kind "compaction")."""
        call = self.gate.bind(req.trust, req.session_key, uuid.uuid4().hex)
        token = ON_CALL.set(call.recorder("compaction"))
        try:
            return await self._compact_now(req, focus)
        except BudgetRefused as e:  # a summary is a model call: over budget, none
            return e.message
        finally:
            ON_CALL.reset(token)

    async def _run_turn(
        self, req: TurnRequest, turn_id: str, on_event: Callable[[Any], None] | None = None
    ) -> TurnResult:
        # imported here, not at the top: the loop brings in bot.media and the delivery
        # previews, which a command that only builds an agent never needs
        from bot.agent.loop import run_agent_loop
        from bot.media import policy_for
        from bot.prompt.hooks import apply_system, apply_user

        started = time.perf_counter()
        a = self.cfg.agent
        system = self.system_prompt(req)
        user_text = req.user_text
        if self.hooks is not None:
            hr = await self.hooks.run(
                {
                    "prompt": system,
                    "message": req.message_text or req.user_text,
                    "session_key": req.session_key,
                    "channel": req.channel,
                    "kind": req.kind,
                }
            )
            system = apply_system(system, hr)
            user_text = apply_user(user_text, hr)
        if req.client_instructions:  # after every section: the cached part stays identical
            system = f"{system}\n## Client Instructions\n{req.client_instructions}"
        user_msg: dict[str, Any] = {"role": "user", "content": user_text}
        if req.media:  # references, not bytes: bot.media builds the image parts per request
            user_msg["media"] = list(req.media)
        turn_msgs = [*req.prior, user_msg] if req.user_turn else list(req.prior)
        tail = turn_msgs + (
            [{"role": "system", "content": req.after_user_system}] if req.after_user_system else []
        )
        ctx = self.tool_context(req)
        registry = self.registry if req.trust == "owner" else self.guest_registry
        registry = registry if req.tools is None else registry.only(req.tools)  # a trigger turn
        fit = None
        if a.compaction.enabled:
            tools = registry.openai_tools() if a.native_tools and len(registry) else None
            if req.client_tools and a.native_tools:
                tools = [*(tools or []), *req.client_tools]
            history, state = await self.compactor.history_for_turn(
                req, system, tools, ctx, registry, tail
            )
            fit = self.compactor.fitter(req, system, tools, ctx, registry, state)
        else:
            history = self.store.history(
                req.session_key, limit=a.history_limit, max_chars=a.history_max_chars
            )
        messages: list[dict] = [{"role": "system", "content": system}, *history, *tail]
        result = await run_agent_loop(
            self.llm,
            messages,
            registry,
            ctx,
            native_tools=a.native_tools,
            max_iterations=a.max_tool_iterations,
            reasoning_tags=a.reasoning_tags,
            fit=fit,
            media=policy_for(self.cfg),
            budget=lambda: self.gate.refusal(req.trust),
            on_event=on_event,
            client_tools=req.client_tools,
            params=req.params,
        )
        # an error text is told to the user, never stored as an assistant turn
        to_store = [*turn_msgs, *result.new_messages]
        return TurnResult(
            text=result.text,
            to_store=to_store,
            error=result.error,
            error_kind=result.error_kind,
            usage=result.usage,
            client_calls=result.client_calls,
            finish_reason=result.finish_reason,
            turn_id=turn_id,
            system_prompt=system,
            duration=time.perf_counter() - started,
        )

    def _openai_tools(self, trust: str) -> list[dict] | None:
        """The tool schemas a request of this trust level carries (None in text mode,
        where they are part of the system prompt)."""
        if not self.cfg.agent.native_tools:
            return None
        reg = self.registry if trust == "owner" else self.guest_registry
        return reg.openai_tools() if len(reg) else None

    def tool_names(self, trust: str) -> set[str]:
        """The names of Chela's own tools at this trust level."""
        return {t.name for t in self._tool_specs[trust]}

    def _system_for(self, req: TurnRequest) -> str:
        """The system prompt of a request, hooks applied (for commands: no message text)."""
        return self.system_prompt(req)

    async def _compact_now(self, req: TurnRequest, focus: str) -> str:
        if not self.cfg.agent.compaction.enabled:
            return "Compaction is off (agent.compaction.enabled = false)."
        system = self._system_for(req)
        tools = self._openai_tools(req.trust)
        registry = self.registry if req.trust == "owner" else self.guest_registry
        b = self.compactor
        before = await b.usage(req.session_key, system, tools)
        out = await b.compact(
            req,
            system,
            tools,
            self.tool_context(req),
            registry,
            reason="command",
            focus=focus,
            keep_tokens=0,
        )
        if out is None:
            return "Nothing to compact yet."
        how = (
            ""
            if out.source == "model"
            else " (the model was unavailable, so it is a plain condensed list)"
        )
        return (
            f"Compacted {out.dropped} older messages into a summary{how}. "
            f"History: {before['used']} -> {out.tokens_after} tokens of {before['budget']}."
        )

    async def context_usage(self, req: TurnRequest) -> dict:
        """Tokens the session's history uses against its budget (/status, /context)."""
        return await self.compactor.usage(
            req.session_key, self._system_for(req), self._openai_tools(req.trust)
        )

    def tool_context(self, req: TurnRequest):
        from bot.agent.tools import ToolContext
        from bot.agent.tools.session import with_origin

        a = self.cfg.agent
        owner = req.trust == "owner"
        return ToolContext(
            file_root=self.file_root(req),
            trust=req.trust,
            session_key=req.session_key,
            agent_id=a.id,
            media_dir=self._media_dir if owner else None,
            timezone=a.timezone,
            model=a.model,
            exec_policy=self._exec_policy,  # one for every turn: frozen, its list a tuple
            send_message=self._sender_for(req.route, owner=owner),
            spawn_subagent=(lambda task, label: self._spawn(task, label, req))
            if req.kind != "subagent"
            else None,
            session_info=lambda: self._session_info(req.session_key),
            cron=with_origin(self.cron_api, req.route) if owner else None,
            secrets=self.secrets,
            request_approval=self._approver_for(req),
            memory=self.memory if owner else None,  # guests have no memory tools
        )

    def file_root(self, req: TurnRequest) -> Path:
        """Where the turn's file tools, exec and media markers work: the workspace for the
        owner, the guest's own directory (created on demand, private) otherwise."""
        if req.trust == "owner":
            return self.cfg.agent.workspace
        if req.file_root is None:
            raise ValueError("a guest turn needs its own file root")
        from bot.fs import private_dir

        return private_dir(req.file_root)

    def _sender_for(self, route: dict, *, owner: bool):
        """The message tool's sender; an empty channel or recipient means this chat.  A
        guest turn may only write to its own chat."""
        if self.send_message is None:
            return None
        send = self.send_message
        # this chat on the account it came in on (``telegram:work``; ``telegram``: default)
        here = (
            account_key(route.get("channel", ""), route.get("account") or ""),
            route.get("chat_id", ""),
        )

        async def sender(channel: str, to: str, text: str) -> str:
            target = (channel or here[0], to or here[1])
            if not owner and target != here:
                return "Error: in this conversation messages can only go to this chat."
            return await send(target[0], target[1], text)

        return sender

    def _approver_for(self, req: TurnRequest):
        """exec security "ask": hold a command and ask the owner."""
        if self.approvals is None:
            return None
        approvals = self.approvals

        async def ask(command: str):
            return await approvals.request(
                command, session_key=req.session_key, trust=req.trust, route=req.route
            )

        return ask

    def _session_info(self, key: str) -> dict:
        s = self.store.session(key)
        return {
            "session_key": key,
            "messages": self.store.message_count(key),
            "tokens_in": s["usage_in"],
            "tokens_out": s["usage_out"],
        }

    async def _spawn(self, task: str, label: str, parent: TurnRequest) -> str:
        """A sub-agent: minimal prompt, its own session, result returned to the parent.
        It runs at the parent's trust level, in the parent's file root."""
        from bot.prompt.group import subagent_context
        from bot.rules.keys import subagent_key

        key = subagent_key(self.cfg.agent.id, uuid.uuid4().hex[:12])
        req = TurnRequest(
            session_key=key,
            user_text=task,
            kind="subagent",
            session_kind="subagent",
            extra_context=subagent_context(label or "sub-task"),
            message_text=task,
            trust=parent.trust,
            file_root=parent.file_root,
            route=parent.route,
        )
        res = await self.run_turn(req)
        self.store.commit_turn(key, res.turn_id, res.to_store, kind="subagent", usage=res.usage)
        return res.text


def _fallback_targets(cfg: Config) -> list:
    """``agent.fallbacks`` as the model client's targets, each with its own key."""
    from bot.model import ModelTarget

    out = []
    for i, f in enumerate(cfg.agent.fallback_models()):
        key = cfg.secret(f.api_key_env) or ("sk-local" if f.api_base else "")
        out.append(ModelTarget(f.model, f.api_base, key, f"agent.fallbacks[{i}]"))
    return out


def _alias_targets(cfg: Config) -> list:
    """The ``[agent.models]`` aliases that name an ``api_base`` or key of their own, as
    targets a session's ``/model`` choice finds by model string (bot.model.choice); the
    others use ``agent.model``'s endpoint and key when chosen."""
    from bot.model import ModelTarget

    out = []
    for alias, m in cfg.agent.models.items():
        if m.api_base or m.api_key_env:
            key = cfg.secret(m.api_key_env) or ("sk-local" if m.api_base else "")
            out.append(ModelTarget(m.model, m.api_base, key, f"agent.models.{alias}"))
    return out


def _web_tools_for(cfg: Config) -> dict:
    """web_fetch / web_search, built only when tools.enabled or tools.guest names them."""
    names = {"web_fetch", "web_search"}
    if not names & (set(cfg.tools.enabled) | set(cfg.tools.guest)):
        return {}
    from bot.agent.tools.web import web_tools

    return web_tools(cfg.tools.web)


def _spec_keys(specs: dict) -> dict:
    return {k: tuple((t.name, t.summary) for t in v) for k, v in specs.items()}


def _spec_full(specs: dict) -> dict:
    return {
        k: tuple((t.name, t.summary, json.dumps(t.parameters, sort_keys=True)) for t in v)
        for k, v in specs.items()
    }


def _generated_secrets(cfg: Config) -> tuple[str, ...]:
    """Secrets Chela keeps in files rather than the environment: the generated HTTP token."""
    if not cfg.channels.http.enabled or cfg.channels.http.token_env:
        return ()
    try:
        token = cfg.http_token_path.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return ()
    return (token,) if len(token) >= 16 else ()
