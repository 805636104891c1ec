"""A JSON-RPC 2.0 client for signal-cli's ``POST /api/v1/rpc`` (signal-cli-jsonrpc(5)).

Transport only: it knows methods, params and results as JSON values, not Chela's message
types.  It owns the aiohttp session, which the adapter also uses for the event stream and
the ``/api/v1/check`` probe, so one connection pool serves the whole channel.

Errors come out as ``RpcError``: ``code`` is set when signal-cli answered with a JSON-RPC
error (the call reached it and was refused), ``None`` for transport and HTTP failures;
``retry_after`` carries a rate limit's wait (an HTTP 429 ``Retry-After`` header or a
``retryAfterSeconds`` in the error's data).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import time
from typing import Any

import aiohttp

log = logging.getLogger(__name__)


class RpcError(Exception):
    def __init__(
        self, message: str, *, code: int | None = None, retry_after: float | None = None
    ) -> None:
        super().__init__(message)
        self.code = code
        self.retry_after = retry_after


def find_retry_after(data: Any, depth: int = 0) -> float | None:
    """signal-cli reports rate limits with a ``retryAfterSeconds`` somewhere in error data."""
    if depth > 4:
        return None
    if isinstance(data, dict):
        for key in ("retryAfterSeconds", "retry_after", "retryAfter"):
            val = data.get(key)
            if isinstance(val, (int, float)) and val >= 0:
                return float(val)
        for val in data.values():
            found = find_retry_after(val, depth + 1)
            if found is not None:
                return found
    elif isinstance(data, list):
        for val in data:
            found = find_retry_after(val, depth + 1)
            if found is not None:
                return found
    return None


class RpcClient:
    """Calls ``base_url + /api/v1/rpc``.  ``account``, when set, is added to every call's
    params that does not name one (``version`` excepted), as a multi-account daemon needs."""

    def __init__(
        self,
        base_url: str,
        *,
        account: str = "",
        timeout: float = 60.0,
        connect_timeout: float = 10.0,
        retry_delay: float = 1.0,
        max_retry_after: float = 30.0,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.account = account
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.retry_delay = retry_delay
        self.max_retry_after = max_retry_after
        self._ids = itertools.count(1)
        self._session: aiohttp.ClientSession | None = None

    def session(self) -> aiohttp.ClientSession:
        """The shared session, (re)created when missing or closed."""
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession()
        return self._session

    async def close(self) -> None:
        session, self._session = self._session, None
        if session is not None and not session.closed:
            await session.close()

    async def call(self, method: str, params: dict[str, Any], *, retries: int = 1) -> Any:
        """``call_once`` with up to ``retries`` more attempts after a failure, waiting
        ``retry_delay`` (or the rate limit's wait, capped at ``max_retry_after``) between
        them.  Raises the last ``RpcError``."""
        for attempt in range(retries + 1):
            try:
                return await self.call_once(method, params)
            except RpcError as e:
                if attempt >= retries:
                    raise
                wait = self.retry_delay
                if e.retry_after is not None:
                    wait = min(max(e.retry_after, wait), self.max_retry_after)
                log.warning("signal: %s failed (%s); retrying in %.1fs", method, e, wait)
                await asyncio.sleep(wait)
        raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises

    async def call_once(self, method: str, params: dict[str, Any]) -> Any:
        """One request; the call's ``result`` or ``RpcError``."""
        session = self.session()
        if self.account and "account" not in params and method != "version":
            params = dict(params, account=self.account)
        body = {
            "jsonrpc": "2.0",
            "method": method,
            "params": params,
            "id": f"chela-{next(self._ids)}",
        }
        timeout = aiohttp.ClientTimeout(total=self.timeout, connect=self.connect_timeout)
        started = time.monotonic()
        try:
            async with session.post(
                f"{self.base_url}/api/v1/rpc", json=body, timeout=timeout
            ) as resp:
                raw = await resp.read()
                status = resp.status
                retry_after_hdr = resp.headers.get("Retry-After")
        except (TimeoutError, aiohttp.ClientError, OSError) as e:
            raise RpcError(f"{type(e).__name__}: {e} (daemon at {self.base_url})") from e
        log.debug(
            "signal: rpc %s -> HTTP %s in %.0fms",
            method,
            status,
            (time.monotonic() - started) * 1000,
        )
        if status != 200:
            retry_after = None
            if status == 429 and retry_after_hdr and retry_after_hdr.strip().isdigit():
                retry_after = float(retry_after_hdr)
            raise RpcError(
                f"HTTP {status}: {raw[:200].decode('utf-8', 'replace')}", retry_after=retry_after
            )
        try:
            data = json.loads(raw)
        except ValueError as e:
            raise RpcError(f"invalid JSON from daemon: {raw[:200]!r}") from e
        if not isinstance(data, dict):
            raise RpcError(f"unexpected JSON-RPC response: {str(data)[:200]}")
        err = data.get("error")
        if err:
            if isinstance(err, dict):
                code = err.get("code")
                raise RpcError(
                    f"JSON-RPC error {code}: {err.get('message')}",
                    # a code that is not an integer still means signal-cli answered: keep
                    # that fact (-32603, JSON-RPC's "internal error"), as a missing one not
                    code=code if isinstance(code, int) or code is None else -32603,
                    retry_after=find_retry_after(err.get("data")),
                )
            raise RpcError(f"JSON-RPC error: {err}")
        return data.get("result")
