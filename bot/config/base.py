"""What every config section shares: the strict model base and the id-list checks."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict


class Model(BaseModel):
    """A config section: unknown keys are errors, defaults are validated too."""

    model_config = ConfigDict(extra="forbid", validate_default=True)


def ids_only(v: list[str], what: str) -> list[str]:
    """Entries that name people or chats must be immutable platform ids."""
    for x in v:
        if x.strip().startswith("@"):
            raise ValueError(
                f"{x!r} is a username; {what} take ids only (usernames can be changed or taken by "
                "someone else). To find an id, have that person message the bot: the pairing "
                "reply shows their user id, and `chela pairing list` lists it"
            )
        if not x.strip():
            raise ValueError("an empty id")
    return [x.strip() for x in v]


def as_strs(v: Any) -> Any:
    """A list of ids as strings (ids are often written as TOML integers)."""
    if isinstance(v, list):
        return [str(x) for x in v]
    return v
