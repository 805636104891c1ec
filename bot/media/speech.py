"""Spoken replies: ``[VOICE:…]`` and ``[[audio_as_voice]]`` become speech (litellm)."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import re
from pathlib import Path
from typing import Any

from bot.media.audio import endpoint_key
from bot import fs

log = logging.getLogger("chela.media")


def speech_endpoint(cfg: Any) -> tuple[str, str]:
    """(api_base, key) of the speech endpoint: ``media.tts_api_base`` with its own
    ``tts_api_key_env``, else the transcription endpoint's, else the agent's."""
    m = cfg.media
    if m.tts_api_base:
        base, env = m.tts_api_base, m.tts_api_key_env
    elif m.transcription_api_base:
        base, env = m.transcription_api_base, m.transcription_api_key_env
    else:
        base, env = cfg.agent.api_base, m.tts_api_key_env
    return base, endpoint_key(cfg, base, env, m.tts_model)


def speech_cost(litellm: Any, model: str, chars: int) -> float:
    """USD of speaking ``chars`` characters (litellm's local price map; 0 when unpriced)."""
    try:
        per = litellm.get_model_info(model).get("input_cost_per_character")
    except Exception:
        return 0.0
    return float(per) * chars if isinstance(per, (int, float)) else 0.0


async def speak(
    cfg: Any, text: str, dest_dir: Path, *, call: Any, root: Path | None = None
) -> Path:
    """Speech for ``text`` (litellm ``aspeech``) as an Ogg/Opus file in ``dest_dir``.
    ``call`` (``bot.model.gate.GateCall``) is the gate of the conversation it is for:
    over its budget nothing is sent (``BudgetRefused``); the cost is recorded.  With
    ``root`` (a guest's directory holding ``dest_dir``) the file is written through the
    root's handle with no link followed (``bot.fs``)."""
    import uuid

    from bot.model import litellm_path

    call.check("speech")
    litellm = await litellm_path.litellm()
    m = cfg.media
    api_base, key = speech_endpoint(cfg)
    kw: dict[str, Any] = {
        "model": m.tts_model,
        "input": text[:4000],
        "voice": m.tts_voice or "alloy",
        "response_format": "opus",
        "timeout": cfg.agent.llm_timeout_seconds,
    }
    if api_base:
        kw["api_base"] = api_base
    if key:
        kw["api_key"] = key
    resp = await asyncio.wait_for(litellm.aspeech(**kw), cfg.agent.llm_timeout_seconds + 5)
    call.record("speech", m.tts_model, {}, speech_cost(litellm, m.tts_model, len(kw["input"])))
    data = resp.content if hasattr(resp, "content") else bytes(resp)
    if not data:
        raise ValueError("the speech endpoint returned no audio")
    if root is None:
        fs.private_dir(dest_dir)
    dest = Path(dest_dir) / f"voice_{uuid.uuid4().hex[:12]}.ogg"
    return await asyncio.to_thread(fs.save, dest, data, root=root)


async def speak_plan(cfg: Any, plan: Any, *, file_root: Path, out_dir: Path, call: Any) -> Any:
    """Spoken replies with ``media.tts_model`` set: a ``[VOICE:<text>]`` marker
    whose target is not a URL or an existing file is text to speak, and
    ``[[audio_as_voice]]`` on a reply without audio speaks the reply's text; the speech
    (Ogg/Opus, in ``out_dir``) goes out as a voice note after the text.  A failed
    synthesis loses nothing: the words stay in the text."""
    if not cfg.media.tts_model or plan.silent:
        return plan
    root = fs.root_holding(file_root, out_dir)  # a guest's directory: through its handle
    media: list[Any] = list(plan.media)
    extra_text: list[str] = []
    changed = False
    # [VOICE:<words>] stays in the text for the reply parser (its target is no path):
    # here it becomes speech
    spoken, body = _voice_text_markers(plan.text)
    if spoken:
        changed = True
        from channels.base import MediaItem

        plan = dataclasses.replace(plan, text=body)
        media += [MediaItem("voice", words) for words in spoken]
    if await _speak_voice_items(cfg, media, extra_text, file_root, out_dir, call, root):
        changed = True
    if await _speak_reply_text(cfg, plan, media, out_dir, call, root):
        changed = True
    if not changed:
        return plan
    text = "\n".join([plan.text, *extra_text]).strip() if extra_text else plan.text
    return dataclasses.replace(plan, text=text, media=[m for m in media if m is not None])


async def _speak_voice_items(
    cfg: Any,
    media: list[Any],
    extra_text: list[str],
    file_root: Path,
    out_dir: Path,
    call: Any,
    root: Any,
) -> bool:
    """Synthesise each voice item of ``media`` whose target is words (in place; a failed
    one becomes None and its words go to ``extra_text``).  True when there was one."""
    changed = False
    for i, item in enumerate(media):
        if item.kind != "voice" or item.is_url or _existing_file(item.target, file_root):
            continue
        words = item.target.strip()
        changed = True
        try:
            path = await speak(cfg, words, out_dir, call=call, root=root)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            log.warning("speech synthesis failed: %s", type(e).__name__)
            media[i] = None
            extra_text.append(words)
            continue
        media[i] = dataclasses.replace(item, target=str(path), name="voice.ogg", mime="audio/ogg")
    return changed


async def _speak_reply_text(
    cfg: Any, plan: Any, media: list[Any], out_dir: Path, call: Any, root: Any
) -> bool:
    """``[[audio_as_voice]]`` on a reply without audio: its text spoken, appended to
    ``media``.  True when it applied (even when the synthesis failed)."""
    has_audio = any(m is not None and m.kind in ("voice", "audio") for m in media)
    if not (plan.audio_as_voice and not has_audio and plan.text.strip()):
        return False
    try:
        path = await speak(cfg, plan.text.strip(), out_dir, call=call, root=root)
    except asyncio.CancelledError:
        raise
    except Exception as e:
        log.warning("speech synthesis failed: %s", type(e).__name__)
    else:
        from channels.base import MediaItem

        media.append(MediaItem("voice", str(path), "voice.ogg", "audio/ogg"))
    return True


_VOICE_TEXT = re.compile(r"\[\s*voice\s*:(?P<words>[^\[\]\n]+)\](?!\()", re.IGNORECASE)


def _voice_text_markers(text: str) -> tuple[list[str], str]:
    """(words of each ``[VOICE:<words>]`` outside code fences, the text without them)."""
    spoken: list[str] = []
    parts = text.split("```")
    for i in range(0, len(parts), 2):  # even parts are outside fences

        def take(m: re.Match) -> str:
            words = m.group("words").strip()
            if not words:
                return m.group(0)  # nothing to say: left as written
            spoken.append(words)
            return ""

        parts[i] = _VOICE_TEXT.sub(take, parts[i])
    if not spoken:
        return [], text
    body = "```".join(parts)
    return spoken, re.sub(r"[ \t]{2,}", " ", body).strip()


def _existing_file(target: str, root: Path) -> bool:
    t = target.strip()
    if t.lower().startswith("file://") or t.startswith(("/", "~")):
        return True  # a path: delivery checks it (and says so when it is not allowed)
    try:
        return (root / t).is_file()
    except (OSError, ValueError):
        return False
