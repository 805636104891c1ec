"""``[memory]``: memory search by meaning (also the shape of ``[agents.<id>.memory]``).

``embedding_model`` empty = full-text search alone (as before).  Otherwise each chunk of
the agent's memory files is embedded once and ``memory_search`` ranks by words and meaning.
``embedding_api_base`` empty = the agent's ``api_base``; ``embedding_api_key_env`` empty =
the agent's key when the endpoint is the agent's own, else the provider's default variable.
"""

from __future__ import annotations

import re

from pydantic import field_validator

from .base import Model


class MemoryConfig(Model):
    embedding_model: str = ""  # e.g. "openai/text-embedding-3-small"; "" = full-text only
    embedding_api_base: str = ""  # "" = agent.api_base
    embedding_api_key_env: str = ""  # the variable holding the embedding endpoint's key

    @field_validator("embedding_api_key_env")
    @classmethod
    def _env_name(cls, v: str) -> str:
        if v and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,127}", v):
            raise ValueError("the name of an environment variable (letters, digits, '_')")
        return v

    @field_validator("embedding_model", "embedding_api_base")
    @classmethod
    def _strip(cls, v: str) -> str:
        return v.strip()
