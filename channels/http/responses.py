"""The HTTP API's error answers, all in OpenAI's JSON shape
``{"error": {"message", "type", "code"}}``, and the body limit they quote."""

from __future__ import annotations

import errno

from aiohttp import web

from channels.base import ChannelError

# a photo of media.max_download_mb (20 MB) as a base64 data URL is ~27 MB; the body
# is read only after the token check
MAX_BODY = 32 * 1024 * 1024

# the failure kind of a request whose turn ended without a reply because the daemon stops
INTERRUPTED = "interrupted"


class AddressInUse(ChannelError, OSError):
    """The listen address is taken (``errno.EADDRINUSE``): the channel cannot start until
    the other process stops or the config names another address; retrying does not help."""

    def __init__(self, host: str, port: int) -> None:
        shown = f"[{host}]" if ":" in host else host
        super().__init__(
            errno.EADDRINUSE,
            f"cannot listen on {shown}:{port}: address already in use (another process "
            "holds it; stop it or set channels.http.listen to a free address)",
        )

    def __str__(self) -> str:
        return str(self.strerror)


def error(status: int, message: str, code: str, kind: str = "") -> web.Response:
    """``kind`` is the error's ``type``: by default ``invalid_request_error`` for a 4xx and
    ``server_error`` for a 5xx (clients such as the ``openai`` SDK and litellm pick their
    exception class from the status and this type)."""
    kind = kind or ("invalid_request_error" if status < 500 else "server_error")
    return web.json_response(
        {"error": {"message": message, "type": kind, "code": code}}, status=status
    )


def failure(kind: str, content: str) -> web.Response:
    """The answer to a turn that failed, by ``OutboundMessage.error`` kind."""
    if kind == "budget":
        return error(429, content, "daily_cost_limit")
    if kind == "invalid_request":
        return error(400, content, "invalid_request_error")
    if kind == "model_not_found":
        return error(404, content, "model_not_found")
    if kind == INTERRUPTED:
        return shutting_down()
    return error(502, content or "the model provider failed", "model_error")


def timed_out() -> web.Response:
    return error(504, "the assistant did not answer in time", "timeout")


SHUTTING_DOWN = "the assistant is shutting down; try again in a moment"


def shutting_down() -> web.Response:
    return error(503, SHUTTING_DOWN, "shutting_down")


def unauthorized(message: str) -> web.Response:
    """A wrong or missing token: the type and code OpenAI-compatible servers use, which
    the ``openai`` SDK and litellm raise as ``AuthenticationError``."""
    resp = error(401, message, "invalid_api_key", "authentication_error")
    resp.headers["WWW-Authenticate"] = 'Bearer realm="chela"'
    return resp


def too_large() -> web.Response:
    return error(
        413,
        f"the request body is over {MAX_BODY // (1024 * 1024)} MB; send a shorter conversation",
        "request_too_large",
    )
