"""Old import path of :mod:`bot.app.http_token`, kept while callers move."""

from bot.app.http_token import MIN_TOKEN_LEN, describe_http_token, ensure_http_token

__all__ = ["MIN_TOKEN_LEN", "describe_http_token", "ensure_http_token"]
