"""The HTTP API's error answers, all in OpenAI's JSON shape
``{"error": {"message", "type", "code"}}`` (SPEC §13), and the body limit they quote."""

from __future__ import annotations

from aiohttp import web

# a photo of media.max_download_mb (20 MB) as a base64 data URL is ~27 MB (SPEC §11); the body
# is read only after the token check
MAX_BODY = 32 * 1024 * 1024


def error(status: int, message: str, code: str) -> web.Response:
    kind = "invalid_request_error" if status < 500 else "server_error"
    return web.json_response(
        {"error": {"message": message, "type": kind, "code": code}}, status=status
    )


def failure(kind: str, content: str) -> web.Response:
    """The answer to a turn that failed, by ``OutboundMessage.error`` kind (SPEC §13)."""
    if kind == "budget":
        return error(429, content, "daily_cost_limit")
    if kind == "invalid_request":
        return error(400, content, "invalid_request_error")
    return error(502, content or "the model provider failed", "model_error")


def timed_out() -> web.Response:
    return error(504, "the assistant did not answer in time", "timeout")


def shutting_down() -> web.Response:
    return error(503, "the assistant is shutting down; try again in a moment", "shutting_down")


def too_large() -> web.Response:
    return error(
        413,
        f"the request body is over {MAX_BODY // (1024 * 1024)} MB; send a shorter conversation",
        "request_too_large",
    )
