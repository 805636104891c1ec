"""The daemon's waits, in one table: values handed to the lifecycle, never literals in it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Timeouts:
    """Seconds.  Channels stop in parallel, so SIGTERM → exit stays within
    ``drain + outbox_grace + channel_stop`` (plus MCP's own bound) whatever the number of
    channels."""

    start_wait: float = 15.0  # each channel gets one attempt before stored messages are recovered
    import_wait: float = 30.0  # "ready" waits this long for litellm's import, then is logged anyway
    drain: float = 10.0  # turns in progress may finish; their messages stay stored otherwise
    outbox_grace: float = 5.0  # sends in flight may finish; unsent rows stay stored
    channel_stop: float = 5.0  # each channel's stop(), all channels at once
    retry_max: float = 60.0  # longest pause between two attempts to start a failing channel


DEFAULT = Timeouts()
