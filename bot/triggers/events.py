"""Event turns: a stored webhook or mail event becomes one turn of its agent, entering the
conversation pipeline where scheduled turns do (run → reply → commit → outbox).

The session is ``hook:<name>`` (``mail:<name>``) of the event's agent; the turn has exactly
the tools its ``[[hooks]]``/``[[mail]]`` table lists; the substituted values are fenced as
untrusted; ``NO_REPLY`` delivers nothing.  The turn, its reply's outbox row and the mark
"this event ran" are committed in ONE transaction, so a crash either re-runs an event
whose turn was never stored or closes one whose turn was — never twice.

An event whose turn finds no model answering is kept as a chat message is
(``bot.conversation.outage``): ``waiting`` in the ledger, run once when the outage's probe
finds the model back, or closed as expired after ``[outage] max_wait`` with its target
told.  While the outage is known, or an older event of the same source waits, an event
waits without asking the model."""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from bot.agent.turn import Agent, TurnRequest
from bot.config import Config, agent_config
from bot.config.triggers import HookConfig, MailConfig
from bot.conversation import commit
from bot.conversation.commands.controls import session_choice
from bot.conversation.events import TurnEvents
from bot.conversation.lanes import SessionLanes
from bot.conversation.outage import DOWN, Outage
from bot.conversation.reply import scheduled_outbound, scheduled_plan
from bot.conversation.requests import route_traits, scheduled_request
from bot.conversation.run import Run
from bot.delivery import send
from bot.delivery.outbox import Outbox
from bot.rules.untrusted import untrusted_block
from bot.schedule.turns import last_of_agent
from bot.store import Store
from bot.store.triggers import DONE_KEY
from bot.triggers.mail import MailWatcher
from channels.base import Channel, InboundMessage, OutboundMessage, adapter_for
from channels.best_effort import best_effort

log = logging.getLogger("chela.hooks")

FIRST_ATTEMPT_WAIT = 10.0  # seconds an event's send is awaited before the outbox goes on alone
PRUNE_EVERY = 3600.0  # seconds between prunes of the ledger and the delivery ids (and at start)
Spec = HookConfig | MailConfig
WAITING = "waiting (model outage)"  # the ledger's result while an event waits for the model
_MARKER = re.compile(r"\{(body|event|headers|mail|name)\}")  # what a prompt may name


def expired_line(sources: list[str], max_wait: str) -> str:
    return (
        f"{len(sources)} event(s) from {', '.join(sorted(set(sources)))} arrived while my model "
        f"was unreachable; it stayed down longer than {max_wait}, so I did not act on them "
        f"(see chela hooks log)."
    )


def session_key(agent: str, source: str) -> str:
    """``agent:<id>:hook:<name>`` (``source`` is the hook's name) or ``agent:<id>:mail:<name>``."""
    kind = "" if source.startswith("mail:") else "hook:"
    return f"agent:{agent}:{kind}{source}"


def render(prompt: str, name: str, payload: Mapping[str, Any]) -> str:
    """The hook's prompt (the owner's own text) with each value fenced as untrusted."""
    where = f"webhook {name}" if "mail" not in payload else f"mail account {name}"
    what = {
        "body": "Webhook body",
        "event": "Webhook event name",
        "headers": "Webhook headers",
        "mail": "Mail",
    }

    def value(m: re.Match[str]) -> str:
        key = m.group(1)
        if key == "name":
            return name
        return untrusted_block(what[key], where, str(payload.get(key, "")))

    # one pass over the owner's text: a value is never searched for markers again
    return _MARKER.sub(value, prompt)


def explicit_route(deliver: str) -> dict[str, Any]:
    """``<channel>[:<account>]:<chat id>`` as a route."""
    parts = deliver.split(":")
    channel, account = parts[0], parts[1] if len(parts) == 3 else "default"
    return {"channel": channel, "chat_id": parts[-1], "account": account, "thread_id": None}


class Triggers:
    """Runs event turns: one per accepted event, on its session's lane."""

    def __init__(
        self,
        cfg: Config,
        store: Store,
        agents: Mapping[str, Agent],
        lanes: SessionLanes,
        outbox: Outbox,
        channels: dict[str, Channel],
        runner: Run | None = None,
        outage: Outage | None = None,
    ) -> None:
        self.cfg = cfg
        self.store = store
        self.lanes = lanes
        self.outbox = outbox
        self.channels = channels
        self.runner = runner or Run(agents or {}, TurnEvents())
        self.specs: dict[str, Spec] = {h.name: h for h in cfg.hooks}
        self.specs.update({f"mail:{m.name}": m for m in cfg.mail})
        self._tasks: set[asyncio.Task] = set()
        self._accepted: dict[str, dict[str, Any]] = {}  # stored, its turn not started yet
        self._running: set[str] = set()  # event ids whose turn task exists
        self._pruned = time.monotonic()
        self.outage = outage  # None: an event whose model is down fails (no probe to wait for)
        if outage is not None:
            outage.keep_also(self)  # expired and released with the kept chat messages

    # ------------------------------------------------------------------- accepting
    def accept(self, source: str, delivery_id: str, payload: dict) -> str | None:
        """Store an event (None: its delivery id was seen); ``started`` runs it."""
        self._prune()
        event_id = self.store.trigger_accept(source, delivery_id, payload)
        if event_id is not None:
            self._accepted[event_id] = {"id": event_id, "source": source, "payload": payload}
        return event_id

    def refuse(self, source: str, verdict: str) -> None:
        self._prune()
        self.store.trigger_refused(source, verdict)

    def _prune(self) -> None:
        """Hourly while the daemon runs (a daemon up for months keeps 30 days, not months)."""
        if time.monotonic() - self._pruned >= PRUNE_EVERY:
            self._pruned = time.monotonic()
            self.store.trigger_prune()

    def started(self, event_id: str) -> None:
        """Run a stored event's turn in the background."""
        row = self._accepted.pop(event_id, None)
        if row is not None:
            self._spawn(row)

    def _spawn(self, row: dict[str, Any]) -> None:
        if row["id"] in self._running:  # one task per event, however it was found
            return
        self._running.add(row["id"])
        task = asyncio.create_task(self.run_event(row), name=f"event:{row['id']}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        task.add_done_callback(lambda _: self._running.discard(row["id"]))

    # ------------------------------------------------------------------------- mail
    def mail_watchers(self) -> list[MailWatcher]:
        """One watcher per ``[[mail]]`` account."""
        return [self._watcher(m) for m in self.cfg.mail]

    def _watcher(self, spec: MailConfig) -> MailWatcher:
        name, store = spec.name, self.store

        def take(validity: int, uid: int, payload: Any, verdict: str) -> str | None:
            self._prune()
            event_id = store.mail_take(name, validity, uid, payload, verdict)
            if event_id is not None:
                self._accepted[event_id] = {
                    "id": event_id,
                    "source": f"mail:{name}",
                    "payload": payload,
                }
            return event_id

        return MailWatcher(
            spec,
            lambda: (self.cfg.secret(spec.username_env), self.cfg.secret(spec.password_env)),
            lambda: store.mail_cursor(name),
            lambda validity, uid: store.mail_set_cursor(name, validity, uid),
            take,
            self.started,
        )

    async def watch_mail(self, watchers: list[MailWatcher] | None = None) -> None:
        """Watch every mail account until cancelled (each reconnects by itself)."""
        watchers = self.mail_watchers() if watchers is None else watchers
        if watchers:
            await asyncio.gather(*(w.run() for w in watchers))

    def recover(self) -> int:
        """Every event accepted but not run (the daemon stopped first): run now, once."""
        self.store.trigger_prune()
        rows = self.store.trigger_pending()
        for row in rows:
            self._spawn(row)
        if rows:
            log.info("running %d stored event(s) left by the last run", len(rows))
        return len(rows)

    # ------------------------------------------------------------ the model is down
    def _keeps(self, row: dict[str, Any], own: Config) -> bool:
        """The event waits without asking the model: the outage is known, or an older event
        of its source waits.  Only the default agent's events (the probe asks its models)."""
        if self.outage is None or own.agent.id != self.cfg.agent.id:
            return False
        return self.outage.down or self.store.trigger_waits(row["source"])

    def _kept_after(self, result: Any, own: Config) -> bool:
        """The turn found no model answering and ran no tool (a tool that ran is never run
        again: such a turn fails as before)."""
        if result.error_kind != DOWN or self.outage is None or own.agent.id != self.cfg.agent.id:
            return False
        return not any(m.get("role") == "assistant" for m in result.to_store)

    def _wait(self, row: dict[str, Any]) -> str:
        self.store.trigger_wait(row["id"], WAITING)
        if self.outage is not None:
            self.outage.begin()
        log.info("event %s of %s kept until the model answers", row["id"], row["source"])
        return WAITING

    def release(self) -> None:
        """The model answers again: every waiting event runs, once, oldest first."""
        rows = self.store.trigger_release()
        for row in rows:
            self._spawn(row)
        if rows:
            log.info("the model answers: running %d kept event(s)", len(rows))

    async def expire(self, before: float) -> None:
        """Events kept since before ``before``: closed as expired, each target told once."""
        max_wait = self.cfg.outage.max_wait
        rows = self.store.trigger_expire(before, f"expired (model down longer than {max_wait})")
        told: dict[tuple[str, str, str], tuple[dict[str, Any], list[str]]] = {}
        for row in rows:
            log.info("event %s of %s expired: the model stayed down", row["id"], row["source"])
            spec = self.specs.get(row["source"])
            route = self._route(spec, spec.agent or self.cfg.agent.id) if spec else None
            if route is not None:
                where = (route["channel"], route.get("account") or "default", str(route["chat_id"]))
                told.setdefault(where, (route, []))[1].append(row["source"])
        for route, sources in told.values():
            out = OutboundMessage(
                chat_id=str(route["chat_id"]),
                thread_id=route.get("thread_id"),
                account=route.get("account") or "default",
                text=expired_line(sources, max_wait),
            )
            with best_effort(log, "telling the owner kept events expired", level=logging.WARNING):
                await send.deliver(self.outbox, route["channel"], out, kind="outage")

    async def drain(self) -> None:
        """Let running event turns finish (the daemon's stop bounds the wait)."""
        if self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    # ---------------------------------------------------------------------- the turn
    async def run_event(self, row: dict[str, Any]) -> str:
        spec = self.specs.get(row["source"])
        if spec is None:  # the hook was removed from the config since
            self.store.trigger_finish(row["id"], "skipped (no such trigger now)")
            return "skipped"
        own = agent_config(self.cfg, spec.agent or self.cfg.agent.id)
        key = session_key(own.agent.id, row["source"])
        try:
            result = await self.lanes.submit(key, lambda: self._attempt(row, spec, own, key))
        except Exception as e:  # never lost silently: the ledger says what happened
            if self.lanes.closed:  # shutting down: it stays pending, run after the restart
                return "pending"
            log.exception("event %s of %s failed", row["id"], row["source"])
            result = f"failed: {type(e).__name__}"
        if result == WAITING:
            return result
        self.store.trigger_finish(row["id"], result)
        log.info("event %s of %s: %s", row["id"], row["source"], result)
        return result

    def _route(self, spec: Spec, agent: str) -> dict[str, Any] | None:
        if spec.deliver == "none":
            return None
        if spec.deliver == "owner":
            return last_of_agent(self.store, self.cfg, agent)
        return explicit_route(spec.deliver)

    def _request(self, key: str, text: str, route: dict | None, own: Config, spec: Spec):
        req = scheduled_request(
            key,
            text,
            kind="hook" if isinstance(spec, HookConfig) else "mail",
            session_kind="cron",  # an isolated session: the minimal prompt, as a cron job's
            route=route,
            traits=route_traits(self.cfg, self.channels, route),
            agent=own.agent.id,
        )
        return replace(req, tools=tuple(spec.tools))

    async def _attempt(self, row: dict[str, Any], spec: Spec, own: Config, key: str) -> str:
        """On the session's lane: the event's turn, or kept for the model (decided and
        recorded here, so the next event of the lane sees it)."""
        if self._keeps(row, own):
            return self._wait(row)
        result = await self._turn(row, spec, own, key)
        return self._wait(row) if result == WAITING else result

    async def _turn(self, row: dict[str, Any], spec: Spec, own: Config, key: str) -> str:
        route = self._route(spec, own.agent.id)
        name = row["source"].removeprefix("mail:")
        req: TurnRequest = self._request(
            key, render(spec.prompt, name, row["payload"]), route, own, spec
        )
        msg = InboundMessage(
            channel=route["channel"] if route else "hooks",
            chat_id=str(route["chat_id"]) if route else key,
            sender_id="",
            text=req.user_text,
        )
        model, effort = session_choice(own, self.store, key)
        outcome = await self.runner.run(
            req, msg, None, None, lambda: None, model=model, effort=effort
        )
        result = outcome.result
        if result is None:
            return "stopped"
        if result.error:
            return (
                WAITING
                if self._kept_after(result, own)
                else f"failed: {result.error_kind or 'error'}"
            )
        done = {DONE_KEY + row["id"]: "ran"}
        plan = scheduled_plan(result, heartbeat=False)
        if plan.silent or route is None:
            commit.scheduled(self.store, key, result, kind=req.kind, state=done, agent=own.agent.id)
            if plan.silent:
                return "silent (NO_REPLY)"
            log.warning("event %s: deliver = %r has no route; not sent", row["id"], spec.deliver)
            return "no target (the owner has no route yet)"
        return await self._send(key, result, plan, route, own, req.kind, done)

    async def _send(self, key, result, plan, route, own: Config, kind: str, done: dict) -> str:
        ch = adapter_for(self.channels, route["channel"], route.get("account") or "default")
        out = scheduled_outbound(own, ch, plan, route)
        ids = commit.scheduled(
            self.store,
            key,
            result,
            kind=kind,
            channel=route["channel"],
            out=out,
            state=done,
            agent=own.agent.id,
        )
        try:
            sent = await asyncio.wait_for(send.deliver_stored(self.outbox, ids), FIRST_ATTEMPT_WAIT)
        except TimeoutError:
            sent = ["queued"]
        status = (sent or ["failed"])[0]
        where = f"{route['channel']}:{route['chat_id']}"
        return f"delivered to {where}" if status == "sent" else f"{status} ({where})"
