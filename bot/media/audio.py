"""Voice notes and audio: durations from the headers, transcription (litellm)."""

from __future__ import annotations

import asyncio
import io
import struct
from pathlib import Path
from typing import Any

from bot import fs

MAX_AUDIO_BYTES = 256 * 1024 * 1024  # a file read here by path (intake passes the bytes)


# -------------------------------------------------------------------------- audio
def audio_duration(src: bytes | Path) -> float | None:
    """Seconds of an Ogg (Opus or Vorbis) or WAV file, from its headers; None otherwise.
    (Telegram, Signal and Discord voice notes are Ogg/Opus.)  ``src`` is the file's bytes,
    read once by the caller through ``bot.fs``, or a file read here (no link followed)."""
    try:
        data = src if isinstance(src, bytes) else fs.read_in(src, MAX_AUDIO_BYTES)
    except OSError:
        return None
    head = data[:4096]
    if head[:4] == b"RIFF" and head[8:12] == b"WAVE":
        return _wav_seconds(data)
    if head[:4] != b"OggS":
        return None
    return _ogg_seconds(head, data[-65536:])


def _wav_seconds(data: bytes) -> float | None:
    import wave

    try:
        with wave.open(io.BytesIO(data), "rb") as w:
            rate = w.getframerate()
            return w.getnframes() / rate if rate else None
    except Exception:  # wave.Error, EOFError and friends
        return None


def _ogg_seconds(head: bytes, tail: bytes) -> float | None:
    rate, pre_skip = 0, 0
    i = head.find(b"OpusHead")
    if i >= 0 and len(head) >= i + 16:
        pre_skip = struct.unpack_from("<H", head, i + 10)[0]
        rate = 48000  # Opus granule positions always count 48 kHz samples
    else:
        j = head.find(b"\x01vorbis")
        if j >= 0 and len(head) >= j + 16:
            rate = struct.unpack_from("<I", head, j + 12)[0]
    k = tail.rfind(b"OggS")
    if not rate or k < 0 or len(tail) < k + 14:
        return None
    granule = struct.unpack_from("<q", tail, k + 6)[0]
    if granule <= 0:
        return None
    return max(0.0, (granule - pre_skip) / rate)


def format_duration(seconds: float | None) -> str:
    if seconds is None:
        return ""
    s = round(seconds)
    h, rest = divmod(s, 3600)
    m, sec = divmod(rest, 60)
    return f"{h}:{m:02d}:{sec:02d}" if h else f"{m}:{sec:02d}"


LOCAL_KEY = "sk-local"  # a placeholder, no secret: servers without keys want some value


def endpoint_key(cfg: Any, api_base: str, key_env: str, model: str) -> str:
    """The key a media endpoint gets: only its own.

    ``key_env`` (``media.transcription_api_key_env`` / ``tts_api_key_env``) names the
    endpoint's own key.  Without one, the agent's key goes only where the agent's calls
    go: the same ``api_base``, or (no base at all) the same provider.  Any other base gets
    the placeholder: never the agent's key, and never litellm's provider default from the
    environment (``OPENAI_API_KEY``), which it would send when no key is given.  With no
    base and another provider, "" leaves the key to litellm's default for that provider."""
    if key_env:
        return cfg.secret(key_env) or (LOCAL_KEY if api_base else "")
    a = cfg.agent
    if api_base == a.api_base and (api_base or _provider(model) == _provider(a.model)):
        key = cfg.secret(a.api_key_env) if a.api_key_env else ""
        return key or (LOCAL_KEY if api_base else "")
    return LOCAL_KEY if api_base else ""


def _provider(model: str) -> str:
    """The provider litellm routes ``model`` to ("" when it cannot tell)."""
    from bot.model import litellm_path

    if litellm_path.loaded() is not None:
        try:
            return str(litellm_path.loaded().get_llm_provider(model)[1])
        except Exception:
            pass
    return model.split("/", 1)[0] if "/" in model else ""


def transcription_endpoint(cfg: Any) -> tuple[str, str]:
    """(api_base, key) of the transcription endpoint."""
    m = cfg.media
    base = m.transcription_api_base or cfg.agent.api_base
    return base, endpoint_key(cfg, base, m.transcription_api_key_env, m.transcription_model)


def transcription_cost(litellm: Any, model: str, seconds: float | None, usage: dict) -> float:
    """USD of one transcription from litellm's local price map: per second of audio
    (whisper), else per token when the server reported tokens; 0 when unpriced."""
    try:
        info = litellm.get_model_info(model)
    except Exception:
        return 0.0

    def price(key: str) -> float:
        v = info.get(key) if isinstance(info, dict) else None
        return float(v) if isinstance(v, (int, float)) else 0.0

    if price("input_cost_per_second") and seconds:
        return price("input_cost_per_second") * seconds
    audio_in = price("input_cost_per_audio_token") or price("input_cost_per_token")
    return usage.get("prompt_tokens", 0) * audio_in + usage.get("completion_tokens", 0) * price(
        "output_cost_per_token"
    )


def _transcription_usage(resp: Any) -> dict[str, int]:
    """Tokens an OpenAI-style transcription answer reports (``usage.input_tokens`` /
    ``output_tokens``, newer models); {} when it reports none."""
    u = getattr(resp, "usage", None)
    if u is None and isinstance(resp, dict):
        u = resp.get("usage")
    if u is None:
        return {}
    get = u.get if isinstance(u, dict) else (lambda k, d=None: getattr(u, k, d))
    try:
        return {
            "prompt_tokens": int(get("input_tokens", 0) or get("prompt_tokens", 0) or 0),
            "completion_tokens": int(get("output_tokens", 0) or get("completion_tokens", 0) or 0),
        }
    except (TypeError, ValueError):
        return {}


async def transcribe(
    cfg: Any, path: Path, name: str, mime: str, *, call: Any, data: bytes | None = None
) -> str:
    """The text of a voice note or audio file (litellm ``atranscription``, any
    OpenAI-compatible ``/audio/transcriptions``).  Raises on failure.

    ``call`` (a ``bot.model.gate.GateCall``) is the model gate for whoever sent the audio:
    over its budget nothing is sent (``BudgetRefused``); the call's cost is recorded.
    ``data`` is the file's bytes, read once by the caller through ``bot.fs``;
    without it ``path`` is read here, no link followed."""
    from bot.model import litellm_path

    call.check("transcription")
    litellm = await litellm_path.litellm()
    m = cfg.media
    api_base, key = transcription_endpoint(cfg)
    if data is None:
        data = await asyncio.to_thread(fs.read_in, path, MAX_AUDIO_BYTES)
    kw: dict[str, Any] = {
        "model": m.transcription_model,
        "file": (_upload_name(name, path, mime), data, mime or "application/octet-stream"),
        "timeout": cfg.agent.llm_timeout_seconds,
        "max_retries": 0,
    }
    if api_base:
        kw["api_base"] = api_base
    if key:
        kw["api_key"] = key
    resp = await asyncio.wait_for(litellm.atranscription(**kw), cfg.agent.llm_timeout_seconds + 5)
    usage = _transcription_usage(resp)
    seconds = await asyncio.to_thread(audio_duration, data)
    call.record(
        "transcription",
        m.transcription_model,
        usage,
        transcription_cost(litellm, m.transcription_model, seconds, usage),
    )
    text = getattr(resp, "text", None)
    if text is None and isinstance(resp, dict):
        text = resp.get("text")
    return str(text or "").strip()


_AUDIO_EXT = {
    "audio/ogg": ".ogg",
    "audio/opus": ".ogg",
    "audio/mpeg": ".mp3",
    "audio/mp3": ".mp3",
    "audio/mp4": ".m4a",
    "audio/x-m4a": ".m4a",
    "audio/m4a": ".m4a",
    "audio/aac": ".m4a",  # Signal's voice notes; transcription servers sniff the content
    "audio/wav": ".wav",
    "audio/x-wav": ".wav",
    "audio/webm": ".webm",
    "audio/flac": ".flac",
    "video/mp4": ".mp4",
}
_SERVER_EXT = {".flac", ".m4a", ".mp3", ".mp4", ".mpeg", ".mpga", ".oga", ".ogg", ".wav", ".webm"}


def _upload_name(name: str, path: Path, mime: str) -> str:
    """A file name whose extension names a container OpenAI-compatible transcription
    servers accept (they check it): Telegram's ``.oga`` and ``.opus`` are Ogg, a name
    without an extension gets one from the mime type."""
    base = Path(name or path.name).name or "audio"
    stem, suffix = Path(base).stem or "audio", Path(base).suffix.lower()
    if suffix in (".oga", ".opus"):
        return stem + ".ogg"
    if suffix in _SERVER_EXT:
        return base
    ext = _AUDIO_EXT.get((mime or "").split(";")[0].strip().lower())
    if ext is None and path.suffix.lower() in _SERVER_EXT:
        ext = path.suffix.lower()
    return base + ext if ext else base
