"""The OpenAI-compatible HTTP API: ``POST /v1/chat/completions``, ``GET /v1/models``,
``GET /v1/models/{id}`` and ``GET /healthz``.

``adapter.py`` is ``HttpChannel`` (the routes and the requests waiting for their reply),
``guard.py`` the door every request passes first (Host, Origin, token, content type, size),
``parse.py`` the pure validation of a chat completions request, ``stream.py`` the
``stream: true`` answer as server-sent events and ``responses.py`` the JSON error answers.
Every error is OpenAI's JSON shape ``{"error": {"message", "type", "code"}}``.
"""

from channels.http.adapter import HttpChannel
from channels.http.parse import last_user_content as _last_user_content
from channels.http.responses import MAX_BODY

__all__ = ["MAX_BODY", "HttpChannel", "_last_user_content"]
