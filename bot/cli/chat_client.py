"""``chela chat`` next to a running daemon: a client of it, never a second core.

While ``chela run`` holds the state dir's lock, the chat's turns run in that daemon (one
scheduler, one outbox, one set of sessions): each line goes to the daemon's loopback HTTP
API (``POST /v1/chat/completions``, ``stream: true``, ``user = "terminal"``) with the state
dir's credentials (the token in ``<state_dir>/http-token``, or ``channels.http.token_env``),
and the streamed text is shown as it is written.  Ctrl-C (or ``/stop``) cancels the request
and sends ``/stop`` to the daemon, which stops the turn there.

When the daemon runs without its HTTP channel the chat runs its turns in this process as
before; the jobs it adds are stored, and the daemon (which follows the stored jobs) runs
them.  Without a daemon the chat runs in-process."""

from __future__ import annotations

import asyncio
import json
import sys
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from bot.config import Config
from bot.conversation.events import TurnEvent
from channels.base import InboundMessage, OutboundMessage

USER = "terminal"  # the daemon's session for this chat: agent:<id>:http:terminal
HTTP_WAIT = 5.0  # seconds to wait for a starting daemon's HTTP channel
REPLY_WAIT = 900.0  # seconds one reply may take (the daemon's own limit is shorter)


@dataclass(frozen=True)
class Endpoint:
    pid: int | None
    url: str  # http://127.0.0.1:8787
    token: str


def _loopback(listen: str) -> str:
    """The address to reach a listener on this host (a wildcard bind is reached on the
    loopback interface)."""
    host, _, port = listen.rpartition(":")
    host = host.strip("[]")
    if host in ("", "0.0.0.0"):
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


async def find_daemon(cfg: Config) -> tuple[dict | None, Endpoint | None]:
    """(the running daemon's lock info or None, how to reach its HTTP API or None).  A
    daemon still starting is given :data:`HTTP_WAIT` seconds to open its HTTP channel."""
    from bot.app.lock import running_daemon

    info = running_daemon(cfg.agent.state_dir)
    if info is None or not cfg.channels.http.enabled:
        return info, None
    deadline = time.monotonic() + HTTP_WAIT
    while not info.get("http") and time.monotonic() < deadline:
        await asyncio.sleep(0.2)
        info = running_daemon(cfg.agent.state_dir)
        if info is None:
            return None, None
    if not info.get("http"):
        return info, None
    from bot.app.http_token import ensure_http_token

    url = f"http://{_loopback(str(info['http']))}"
    return info, Endpoint(info.get("pid"), url, ensure_http_token(cfg))


async def _sse(resp: Any) -> AsyncIterator[dict]:
    """The JSON objects of a server-sent event stream, until ``[DONE]``."""
    async for raw in resp.content:
        line = raw.decode("utf-8", "replace").strip()
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if data == "[DONE]":
            return
        try:
            obj = json.loads(data)
        except ValueError:
            continue
        if isinstance(obj, dict):
            yield obj


def _error_text(body: Any, status: int) -> str:
    err = body.get("error") if isinstance(body, dict) else None
    msg = err.get("message") if isinstance(err, dict) else None
    return f"The daemon could not answer ({status}): {msg or 'no details'}"


class DaemonClient:
    """The terminal channel's sink: each message is one streamed request to the daemon.
    ``view`` (a ``ChatView``) is fed the streamed text; the reply goes to the terminal
    channel like any delivered reply; ``failures`` notes failed turns (``chela chat -m``)."""

    def __init__(self, endpoint: Endpoint, term: Any, failures: list[str]) -> None:
        self.endpoint = endpoint
        self.term = term
        self.failures = failures
        self.view: Any = None
        self._session: Any = None

    def _http(self) -> Any:
        """A session for the daemon's own API on the loopback interface (an endpoint of the
        owner's config, never a URL someone else chose), with the state dir's token."""
        from bot.net.fetch import endpoint_pool

        if self._session is None:
            self._session = endpoint_pool({"Authorization": f"Bearer {self.endpoint.token}"})
        return self._session

    def _chat_request(self, body: dict) -> Any:
        import aiohttp

        url = f"{self.endpoint.url}/v1/chat/completions"
        timeout = aiohttp.ClientTimeout(total=REPLY_WAIT, sock_connect=10)
        return self._http().post(url, json=body, timeout=timeout)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    def _body(self, text: str, stream: bool) -> dict:
        return {
            "model": "chela",
            "messages": [{"role": "user", "content": text}],
            "stream": stream,
            "user": USER,
        }

    def _event(self, kind: str, turn: str, text: str = "") -> None:
        if self.view is not None:
            self.view.feed(TurnEvent(kind, USER, turn, text=text))  # type: ignore[arg-type]

    async def _ask(self, text: str, turn: str) -> str:
        """The daemon's reply to ``text``, its text streamed to the view."""
        async with self._chat_request(self._body(text, True)) as resp:
            if resp.status != 200:
                try:
                    body = await resp.json(content_type=None)
                except ValueError:
                    body = None
                raise RuntimeError(_error_text(body, resp.status))
            parts: list[str] = []
            async for chunk in _sse(resp):
                if isinstance(chunk.get("error"), dict):
                    raise RuntimeError(_error_text(chunk, 502))
                for choice in chunk.get("choices") or ():
                    delta = (choice.get("delta") or {}).get("content") or ""
                    if delta:
                        parts.append(delta)
                        self._event("text", turn, delta)
            return "".join(parts)

    async def sink(self, msg: InboundMessage, cursor: tuple[str, int] | None = None) -> None:
        """One line: asked of the daemon, its reply shown, the turn's end signalled (the
        terminal keeps no cursor)."""
        import aiohttp

        turn = uuid.uuid4().hex
        self._event("started", turn)
        try:
            reply = await self._ask(msg.text, turn)
        except (aiohttp.ClientError, OSError, RuntimeError) as e:
            text = str(e)
            if not isinstance(e, RuntimeError):
                text = f"The daemon at {self.endpoint.url} did not answer: {e}"
            self.failures.append(text)
            reply = text
        if reply.strip():
            await self.term.send(OutboundMessage(chat_id=msg.chat_id, text=reply))
        await self.term.turn_done(msg.chat_id, msg.message_id)

    async def stop(self, msg: InboundMessage) -> None:
        """The turn was cancelled here (Ctrl-C, ``/stop``): stop it in the daemon too."""
        import aiohttp

        try:
            async with self._chat_request(self._body("/stop", False)) as resp:
                await resp.read()
        except (aiohttp.ClientError, OSError) as e:
            print(f"chela: could not stop the turn in the daemon: {e}", file=sys.stderr)
