"""SSRF-safe outbound HTTP: the only way to fetch a URL someone else chose.

``guard`` decides (the host as the HTTP client reads it, its addresses, the pinned resolver);
``fetch`` fetches (one guarded hop at a time, the body capped).  Nothing here imports the agent,
the media or the channels: they import this."""

from __future__ import annotations

from .fetch import Fetched, Head, Limits, TooLarge, endpoint_session, fetch_url
from .guard import (
    FetchError,
    HostRules,
    PinnedResolver,
    Target,
    canonical_host,
    check_url,
    is_internal,
    is_metadata,
    resolve_host,
)

__all__ = [
    "FetchError",
    "Fetched",
    "Head",
    "HostRules",
    "Limits",
    "PinnedResolver",
    "Target",
    "TooLarge",
    "canonical_host",
    "check_url",
    "endpoint_session",
    "fetch_url",
    "is_internal",
    "is_metadata",
    "resolve_host",
]
