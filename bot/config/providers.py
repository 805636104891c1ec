"""What a model string says about its provider, read from its prefix without importing
litellm: whether litellm routes the prefix with any model name after it, and which
environment variable holds the provider's API key (``openai/…`` → ``OPENAI_API_KEY``).

Every message that names a key variable asks :func:`key_var`, so it names the variable of
the model's own provider and never another's."""

from __future__ import annotations

import os
from collections.abc import Mapping

# the usual key variable of a provider prefix (litellm reads it when no key is configured)
KEY_VARS = {
    "openai": "OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
    "gemini": "GEMINI_API_KEY",
    "openrouter": "OPENROUTER_API_KEY",
    "groq": "GROQ_API_KEY",
    "mistral": "MISTRAL_API_KEY",
    "deepseek": "DEEPSEEK_API_KEY",
    "xai": "XAI_API_KEY",
    "together_ai": "TOGETHERAI_API_KEY",
    "cohere": "COHERE_API_KEY",
    "fireworks_ai": "FIREWORKS_AI_API_KEY",
    "perplexity": "PERPLEXITYAI_API_KEY",
    "cerebras": "CEREBRAS_API_KEY",
    "deepinfra": "DEEPINFRA_API_KEY",
    "nvidia_nim": "NVIDIA_NIM_API_KEY",
    "sambanova": "SAMBANOVA_API_KEY",
    "huggingface": "HUGGINGFACE_API_KEY",
    "text-completion-openai": "OPENAI_API_KEY",
}

# variables that point a provider's client at another server (then no key may be needed)
BASE_VARS = {"openai": ("OPENAI_BASE_URL", "OPENAI_API_BASE")}

# provider prefixes litellm routes with any model name after the slash: the keyed ones
# above, local servers, and clouds whose credentials are not one key variable
KNOWN = frozenset(KEY_VARS) | {
    "ollama",
    "ollama_chat",
    "hosted_vllm",
    "lm_studio",
    "llamafile",
    "custom_openai",
    "vertex_ai",
    "azure",
    "bedrock",
}


def provider_of(model: str) -> str:
    """The provider prefix of a model string, lower-cased ("" when it has none)."""
    prefix, sep, name = model.strip().partition("/")
    return prefix.lower() if sep and name else ""


def known_prefix(model: str) -> bool:
    """True when the prefix alone says litellm routes the model string."""
    return provider_of(model) in KNOWN


def key_var(model: str, api_base: str = "") -> str:
    """The variable the model's provider reads its key from: ``anthropic/…`` →
    ``ANTHROPIC_API_KEY``; a model without a prefix is litellm's default, OpenAI.  None
    ("") for a local server (``api_base``) or a provider without one key variable."""
    if api_base or not model.strip():
        return ""
    return KEY_VARS.get(provider_of(model) or ("openai" if "/" not in model else ""), "")


def missing_key_var(
    model: str,
    api_base: str = "",
    api_key: str = "",
    environ: Mapping[str, str] = os.environ,
) -> str:
    """The provider's key variable when a call to ``model`` would go out with no key: none
    configured (``api_key``, the value of ``api_key_env``), no local server, and the
    provider's own variable unset.  "" when nothing is missing."""
    var = key_var(model, api_base)
    if not var or api_key or environ.get(var):
        return ""
    provider = provider_of(model) or "openai"
    if any(environ.get(b) for b in BASE_VARS.get(provider, ())):
        return ""
    return var
