"""Inbound: ``Poller`` is the long-poll loop of one started ``TelegramChannel``.

Our own loop, not PTB's ``Updater``: the update offset advances only after the sink has
persisted a message, updates that cannot be parsed are skipped one at a time (getUpdates
is called through PTB's public ``Bot.do_api_request``, which answers raw JSON, so one bad
update cannot fail the batch as ``Update.de_list`` would), a stalled long poll is restarted,
network errors back off, and an album (one update per photo) is held and handed on as one
message."""

from __future__ import annotations

import asyncio
import logging
import warnings
from typing import Any

from telegram import Bot
from telegram.error import Conflict, InvalidToken, NetworkError, RetryAfter, TelegramError

from channels.base import InboundMessage, InboundSink
from channels.retry import Backoff
from channels.telegram import translate
from channels.telegram.send import retry_seconds

log = logging.getLogger("chela.channels.telegram")

# do_api_request warns, on every call, that a typed method exists for getUpdates; we take the
# raw answer on purpose (see above), so that one warning is silenced, by its text only (PTB
# attributes it to the event loop's frame).  pyproject.toml repeats it for pytest.
warnings.filterwarnings("ignore", message=r"Please use 'Bot\.getUpdates' instead")


async def get_updates(bot: Bot, data: dict[str, Any], read_timeout: float) -> Any:
    """One getUpdates call; its answer as the Bot API gave it (a list of update dicts)."""
    return await bot.do_api_request("getUpdates", api_kwargs=data, read_timeout=read_timeout)


class _Stopped(Exception):
    """Internal: the channel is stopping."""


class _Stalled(Exception):
    """Internal: a getUpdates call exceeded the stall timeout."""


class Poller:
    def __init__(
        self,
        bot: Bot,
        sink: InboundSink,
        stopping: asyncio.Event,
        *,
        me: translate.Me,
        account: str,
        poll_timeout: int,
        stall_timeout: float,
        allowed_updates: list[str],
        backoff_initial: float,
        backoff_max: float,
        album_wait: float,
    ) -> None:
        self._bot = bot
        self._sink: InboundSink | None = sink
        self._stopping: asyncio.Event | None = stopping
        self._me = me
        self.account = account
        self.poll_timeout = poll_timeout
        self.stall_timeout = stall_timeout
        self.allowed_updates = allowed_updates
        self.backoff_initial = backoff_initial
        self.backoff_max = backoff_max
        self.album_wait = album_wait
        self._backoff = Backoff(backoff_initial, backoff_max)  # between failed getUpdates
        self.polled = asyncio.Event()  # a getUpdates call has come back (or stalled)
        self._offset: int | None = None  # next offset to confirm (last handled update_id + 1)
        self._confirmed: int | None = None  # offset the server has last been told
        # an album being collected: (chat:media_group_id, {update_id: message})
        self._album: tuple[str, dict[int, InboundMessage]] | None = None
        self._album_grew = False

    async def confirm_offset(self) -> None:
        """Tell the server about updates handled since the last poll, so a restart won't replay them."""
        if self._offset is None or self._offset == self._confirmed:
            return
        try:
            await asyncio.wait_for(
                get_updates(
                    self._bot, {"offset": self._offset, "timeout": 0, "limit": 1}, read_timeout=5.0
                ),
                5.0,
            )
            self._confirmed = self._offset
        except Exception:
            log.debug("telegram: could not confirm offset on stop", exc_info=True)

    async def _sleep(self, seconds: float) -> None:
        """Sleep, but wake up (raising _Stopped) as soon as the channel stops."""
        assert self._stopping is not None
        try:
            await asyncio.wait_for(self._stopping.wait(), max(0.0, seconds))
        except TimeoutError:
            return
        raise _Stopped

    async def _fetch(self) -> list[Any]:
        """One getUpdates call, raw JSON (so one bad update cannot poison the batch)."""
        assert self._stopping is not None
        data: dict[str, Any] = {
            "timeout": self.poll_timeout,
            "allowed_updates": self.allowed_updates,
        }
        if self._offset is not None:
            data["offset"] = self._offset
        offset_sent = self._offset
        fetch = asyncio.ensure_future(
            get_updates(self._bot, data, read_timeout=self.poll_timeout + 10.0)
        )
        stop = asyncio.ensure_future(self._stopping.wait())
        try:
            done, _ = await asyncio.wait(
                {fetch, stop}, timeout=self.stall_timeout, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            stop.cancel()
            self.polled.set()
        if fetch not in done:
            fetch.cancel()
            await asyncio.gather(fetch, return_exceptions=True)
            if self._stopping.is_set():
                raise _Stopped
            raise _Stalled
        result = fetch.result()
        if offset_sent is not None:
            self._confirmed = offset_sent
        return result if isinstance(result, list) else []

    async def run(self) -> None:
        self._backoff.reset()
        stopping = self._stopping
        if stopping is None:
            return
        try:
            while not stopping.is_set():
                updates = await self._next_batch()
                if updates is None:
                    continue
                self._backoff.reset()
                for raw in updates:
                    await self._handle_raw(raw)
                    if stopping.is_set():
                        break
                await self._album_tick()
        except _Stopped:
            pass
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("telegram[%s]: poll loop crashed", self.account)

    async def _next_batch(self) -> list[Any] | None:
        """The next getUpdates batch; None after a failure it has waited out (stall, 429,
        network or API error: the wait doubles up to ``backoff_max``)."""
        try:
            return await self._fetch()
        except _Stalled:
            log.warning(
                "telegram[%s]: getUpdates stalled for %.0fs; restarting the poll",
                self.account,
                self.stall_timeout,
            )
            return None
        except RetryAfter as exc:
            log.warning(
                "telegram[%s]: getUpdates rate limited; waiting %.0fs",
                self.account,
                retry_seconds(exc),
            )
            await self._sleep(retry_seconds(exc))
            return None
        except (InvalidToken, Conflict, NetworkError, TelegramError) as exc:
            log.warning(
                "telegram[%s]: getUpdates failed (%s: %s); retrying in %.1fs",
                self.account,
                type(exc).__name__,
                exc,
                self._backoff.peek(),
            )
            await self._sleep(self._backoff.next())
            return None
        except _Stopped:
            raise
        except Exception:
            log.exception(
                "telegram[%s]: unexpected getUpdates error; retrying in %.1fs",
                self.account,
                self._backoff.peek(),
            )
            await self._sleep(self._backoff.next())
            return None

    async def _album_tick(self) -> None:
        """After a batch: wait a little while an album is still growing, else hand it on."""
        if self._album is None:
            return
        if self._album_grew:
            # an album's parts may still be coming: poll again shortly (its updates are not
            # confirmed yet, so the server answers at once with them and anything new)
            self._album_grew = False
            await self._sleep(self.album_wait)
        else:
            await self._flush_album()

    async def _handle_raw(self, raw: Any) -> None:
        update_id = translate.update_id(raw)
        if update_id is None:
            log.warning(
                "telegram[%s]: skipping an update without a valid update_id: %.200r",
                self.account,
                raw,
            )
            return
        if self._offset is not None and update_id < self._offset:
            return  # already handled (replayed batch)
        try:
            inbound = translate.inbound_message(raw, me=self._me, account=self.account)
            group = translate.album_key(raw) if inbound is not None else None
        except Exception as exc:  # the translator never raises; a bug must not stop the poll
            log.warning(
                "telegram[%s]: skipping update %s that could not be translated: %r",
                self.account,
                update_id,
                exc,
            )
            inbound, group = None, None
        if self._album is not None and (group is None or group != self._album[0]):
            await self._flush_album()  # the album ended: one turn, before anything after it
        if inbound is None:
            log.debug(
                "telegram[%s]: update %s has nothing to deliver; skipped", self.account, update_id
            )
            self._offset = update_id + 1
            return
        if group is not None:
            # an album arrives as one update per photo with the same media_group_id: they
            # are held (unconfirmed) and handed on as one message
            if self._album is None:
                self._album = (group, {})
            if update_id not in self._album[1]:
                self._album[1][update_id] = inbound
                self._album_grew = True
            return
        await self._deliver(inbound, update_id)

    async def _flush_album(self) -> None:
        """Hand the held album to the sink as one message (captions joined, attachments
        in order) and confirm all its updates."""
        if self._album is None:
            return
        parts = [m for _, m in sorted(self._album[1].items())]
        last = max(self._album[1])
        await self._deliver(translate.merge_album(parts), last)
        self._album = None
        self._album_grew = False

    async def _deliver(self, inbound: InboundMessage, update_id: int) -> None:
        """The sink, retried until it persists the message; then the offset moves past it."""
        sink = self._sink
        if sink is None:
            return
        backoff = Backoff(self.backoff_initial, self.backoff_max)
        while True:
            try:
                await sink(inbound)
                break
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception(
                    "telegram[%s]: sink failed for update %s; retrying in %.1fs",
                    self.account,
                    update_id,
                    backoff.peek(),
                )
                await self._sleep(backoff.next())  # raises _Stopped on stop: offset not advanced
        self._offset = update_id + 1
