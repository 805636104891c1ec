"""Outbound helpers of ``DiscordChannel``: the keywords of a planned ``Messageable.send``,
the upload of a planned message's files, and a live preview edited into a reply."""

from __future__ import annotations

import logging
from typing import Any

import discord

from channels.best_effort import best_effort

log = logging.getLogger("chela.channels.discord")


def send_options(channel: discord.PartialMessageable, params: dict[str, Any]) -> dict[str, Any]:
    """``Messageable.send`` keywords of a planned call: a reply reference and an idempotency
    nonce, each only when there is one (discord.py's defaults are "not given", not None).
    The nonce is the same on every attempt (retries, after a crash): with enforce_nonce
    (discord.py sets it with the nonce) Discord returns the message it already created
    instead of posting it twice."""
    out: dict[str, Any] = {}
    if params.get("reference") is not None:
        out["reference"] = discord.MessageReference(
            message_id=params["reference"], channel_id=channel.id, fail_if_not_exists=False
        )
    if params.get("nonce"):
        out["nonce"] = params["nonce"]
    return out


async def send_files(
    channel: discord.PartialMessageable, params: dict[str, Any], account: str
) -> discord.Message | None:
    """The planned files as one message; None when the upload fails (logged)."""
    files: list[discord.File] = []
    try:
        for path, filename in params["files"]:
            files.append(discord.File(path, filename=filename))
        return await channel.send(files=files, **send_options(channel, params))
    except (discord.HTTPException, OSError, ValueError) as exc:
        log.warning("discord[%s]: upload failed: %s", account, exc)
        return None
    finally:
        for f in files:
            with best_effort(log, "closing an upload"):
                f.close()


async def replace_preview(
    channel: discord.PartialMessageable, message_id: int, chunk: str, account: str
) -> bool:
    """Edit a live preview into the reply's first chunk.  False when Discord refuses
    (the message is gone): the preview is deleted and the chunk goes out as a new
    message.  Transient failures raise (the outbox retries; an edit is idempotent)."""
    message = channel.get_partial_message(message_id)
    try:
        await message.edit(content=chunk)
        return True
    except (discord.NotFound, discord.Forbidden) as exc:
        log.info(
            "discord[%s]: the preview %s could not be edited (%s); sending the reply anew",
            account,
            message_id,
            exc,
        )
    except discord.HTTPException as exc:
        if exc.status >= 500 or exc.status == 429:
            raise
        log.info("discord[%s]: editing the preview failed (%s)", account, exc)
    with best_effort(log, "deleting the preview"):
        await message.delete()
    return False
