"""Chat completions request validation, pure: a request body in, the text, images
and ``InboundMessage.api`` data out, or the error message a 400 carries.

Each message role has its own reader (``_READERS``); the model parameters and the client's
tools are checked by ``parse_params`` and ``parse_tools``."""

from __future__ import annotations

import base64
import hashlib
import json
import mimetypes
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote_to_bytes

from channels.base import MediaItem

_TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_CHOICE_ERROR = 'tool_choice must be "none", "auto", "required" or a named function'


def last_user_content(messages: Any) -> tuple[str, list[MediaItem]] | str | None:
    """(text, images) of the last user message; None when there is none or its content
    has no usable shape; an error message for a bad ``image_url`` part."""
    if not isinstance(messages, list):
        return None
    for m in reversed(messages):
        if isinstance(m, dict) and m.get("role") == "user":
            return user_content(m.get("content"))
    return None


def _image_part(p: dict, number: int) -> MediaItem | str:
    """An ``image_url`` part as an image attachment, or the error it earns."""
    ref = p.get("image_url")
    url = ref.get("url") if isinstance(ref, dict) else ref
    if not isinstance(url, str) or not url.strip():
        return "an image_url part needs a url"
    url = url.strip()
    name = f"image_{number}"
    if url.startswith("data:"):
        mime = url[5:].split(",", 1)[0].split(";", 1)[0].strip().lower()
        if not mime.startswith("image/"):
            return "an image_url data URL must hold an image (data:image/...)"
        ext = mimetypes.guess_extension(mime) or ""
        return MediaItem("image", "", name + ext, mime, ref=url)
    if url.startswith(("http://", "https://")):
        return MediaItem("image", url, name)
    return "an image_url must be a data: URL or an http(s) URL"


def user_content(c: Any) -> tuple[str, list[MediaItem]] | str | None:
    """(text, images) of a user message's content; None when it has no usable shape; an
    error message for a bad ``image_url`` part.

    ``image_url`` parts (``{"url": ...}`` or a bare string) become image attachments: a
    ``data:`` URL is decoded by ``fetch_media`` after admission, an http(s) URL is left
    for the core to fetch (through its SSRF guard); any other scheme is refused.  Parts
    of other types are ignored."""
    if isinstance(c, str):
        return c, []
    if not isinstance(c, list):
        return None
    texts: list[str] = []
    images: list[MediaItem] = []
    for p in c:
        if not isinstance(p, dict):
            continue
        if p.get("type") == "text":
            if not isinstance(p.get("text"), str):
                return None
            texts.append(p["text"])
        elif p.get("type") == "image_url":
            image = _image_part(p, len(images) + 1)
            if isinstance(image, str):
                return image
            images.append(image)
    return "\n".join(texts), images


def plain_text(c: Any) -> str | None:
    """The text of a system, developer, assistant or tool message's content: a string,
    null, or a list of ``text`` (or ``refusal``) parts; None for any other shape."""
    if c is None:
        return ""
    if isinstance(c, str):
        return c
    if not isinstance(c, list):
        return None
    out = []
    for p in c:
        if not isinstance(p, dict):
            return None
        t = p.get("text", p.get("refusal"))
        if not isinstance(t, str):
            return None
        out.append(t)
    return "\n".join(out)


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _token_limits(body: dict, out: dict[str, Any]) -> str | None:
    for k in ("max_tokens", "max_completion_tokens"):
        v = body.get(k)
        if v is None:
            continue
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            return f"{k} must be a positive integer"
        out[k] = v
    return None


def _sampling(body: dict, out: dict[str, Any]) -> str | None:
    for k, hi in (("temperature", 2.0), ("top_p", 1.0)):
        v = body.get(k)
        if v is None:
            continue
        if not _number(v) or not 0 <= v <= hi:
            return f"{k} must be a number from 0 to {hi:g}"
        out[k] = v
    return None


def _seed(body: dict, out: dict[str, Any]) -> str | None:
    seed = body.get("seed")
    if seed is not None:
        if not isinstance(seed, int) or isinstance(seed, bool):
            return "seed must be an integer"
        out["seed"] = seed
    return None


def _stop(body: dict, out: dict[str, Any]) -> str | None:
    stop = body.get("stop")
    if stop is None:
        return None
    if isinstance(stop, str):
        stop = [stop]
    if (
        not isinstance(stop, list)
        or not 1 <= len(stop) <= 4
        or not all(isinstance(x, str) and x for x in stop)
    ):
        return "stop must be a string or a list of up to 4 strings"
    out["stop"] = stop
    return None


def _response_format(body: dict, out: dict[str, Any]) -> str | None:
    rf = body.get("response_format")
    if rf is None:
        return None
    if not isinstance(rf, dict) or rf.get("type") not in ("text", "json_object", "json_schema"):
        return 'response_format must be {"type": "text" | "json_object" | "json_schema", ...}'
    if rf["type"] == "json_schema" and not isinstance(rf.get("json_schema"), dict):
        return "a json_schema response_format needs a json_schema object"
    out["response_format"] = rf
    return None


def _one_choice(body: dict, out: dict[str, Any]) -> str | None:
    n = body.get("n")
    if n is not None and n != 1:
        return "n must be 1: the assistant gives one answer per request"
    return None


_PARAM_CHECKS: tuple[Callable[[dict, dict[str, Any]], str | None], ...] = (
    _token_limits,
    _sampling,
    _stop,
    _seed,
    _response_format,
    _one_choice,
)


def parse_params(body: dict) -> dict[str, Any] | str:
    """The model parameters a request passes on, checked; or an error."""
    out: dict[str, Any] = {}
    for check in _PARAM_CHECKS:
        error = check(body, out)
        if error is not None:
            return error
    return out


def _tool(t: Any, names: set[str]) -> dict | str:
    """One OpenAI function tool, checked (``names``: the names seen so far); or an error."""
    fn = t.get("function") if isinstance(t, dict) else None
    if not isinstance(t, dict) or t.get("type") != "function" or not isinstance(fn, dict):
        return 'each tool must be {"type": "function", "function": {"name": ...}}'
    name = fn.get("name")
    if not isinstance(name, str) or not _TOOL_NAME.match(name):
        return "a tool name must be 1-64 letters, digits, '_' or '-'"
    if name in names:
        return f"the tool name {name!r} appears twice"
    names.add(name)
    params = fn.get("parameters", {"type": "object", "properties": {}})
    if not isinstance(params, dict):
        return f"the parameters of tool {name!r} must be a JSON schema object"
    spec: dict[str, Any] = {"name": name, "parameters": params}
    if isinstance(fn.get("description"), str):
        spec["description"] = fn["description"]
    if isinstance(fn.get("strict"), bool):
        spec["strict"] = fn["strict"]
    return {"type": "function", "function": spec}


def _tool_choice(choice: Any) -> tuple[Any] | str:
    """The tool_choice (in a 1-tuple: None is a valid answer); or an error."""
    if choice is None:
        return (None,)
    if isinstance(choice, str):
        return (choice,) if choice in ("none", "auto", "required") else _CHOICE_ERROR
    fn = choice.get("function") if isinstance(choice, dict) else None
    if (
        not isinstance(choice, dict)
        or choice.get("type") != "function"
        or not isinstance(fn, dict)
        or not isinstance(fn.get("name"), str)
    ):
        return _CHOICE_ERROR
    return ({"type": "function", "function": {"name": fn["name"]}},)


def parse_tools(body: dict) -> tuple[list[dict], Any] | str:
    """The client's tools (OpenAI function tools) and tool_choice, checked; or an error."""
    tools = body.get("tools")
    out: list[dict] = []
    if tools is not None:
        if not isinstance(tools, list):
            return "tools must be a list"
        names: set[str] = set()
        for t in tools:
            tool = _tool(t, names)
            if isinstance(tool, str):
                return tool
            out.append(tool)
    choice = _tool_choice(body.get("tool_choice"))
    if isinstance(choice, str):
        return choice
    return out, choice[0]


def _image_digest(item: MediaItem) -> str:
    return hashlib.sha256((item.ref or item.target).encode()).hexdigest()[:16]


class _Conversation:
    """What ``parse_request`` gathers while it reads the messages in order."""

    def __init__(self) -> None:
        self.instructions: list[str] = []
        self.convo: list[dict[str, Any]] = []
        self.text = ""
        self.images: list[MediaItem] = []


def _read_instructions(m: dict, role: str, c: _Conversation) -> str | None:
    t = plain_text(m.get("content"))
    if t is None:
        return f"the content of a {role} message must be text"
    if t.strip():
        c.instructions.append(t.strip())
    return None


def _read_user(m: dict, role: str, c: _Conversation) -> str | None:
    parsed = user_content(m.get("content"))
    if isinstance(parsed, str):
        return parsed
    if parsed is None:
        return (
            "a user message's content must be a string or a list of "
            '{"type": "text", "text": "..."} and {"type": "image_url", ...} parts'
        )
    c.text, c.images = parsed
    c.convo.append(
        {"role": "user", "content": c.text, "images": [_image_digest(x) for x in c.images]}
    )
    return None


def _tool_call(call: Any) -> dict | None:
    """An assistant message's tool call, reduced to what the model needs; None when bad."""
    fn = call.get("function") if isinstance(call, dict) else None
    if (
        not isinstance(call, dict)
        or not isinstance(call.get("id"), str)
        or not isinstance(fn, dict)
        or not isinstance(fn.get("name"), str)
    ):
        return None
    args = fn.get("arguments")
    if not isinstance(args, str):
        args = json.dumps(args if args is not None else {})
    return {
        "id": call["id"],
        "type": "function",
        "function": {"name": fn["name"], "arguments": args},
    }


def _read_assistant(m: dict, role: str, c: _Conversation) -> str | None:
    t = plain_text(m.get("content"))
    if t is None:
        return "the content of an assistant message must be text"
    calls = m.get("tool_calls") or []
    if not isinstance(calls, list):
        return "tool_calls must be a list"
    clean = [_tool_call(call) for call in calls]
    if None in clean:
        return "each tool call needs an id and a function name"
    entry: dict[str, Any] = {"role": "assistant", "content": t}
    if clean:
        entry["tool_calls"] = clean
    c.convo.append(entry)
    return None


def _read_tool(m: dict, role: str, c: _Conversation) -> str | None:
    t = plain_text(m.get("content"))
    cid = m.get("tool_call_id")
    if t is None or not isinstance(cid, str) or not cid:
        return "a tool message needs a tool_call_id and text content"
    c.convo.append({"role": "tool", "tool_call_id": cid, "content": t})
    return None


_READERS: dict[str, Callable[[dict, str, _Conversation], str | None]] = {
    "system": _read_instructions,
    "developer": _read_instructions,
    "user": _read_user,
    "assistant": _read_assistant,
    "tool": _read_tool,
}


def _read_messages(messages: list) -> _Conversation | str:
    c = _Conversation()
    for i, m in enumerate(messages):
        role = m.get("role") if isinstance(m, dict) else None
        if not isinstance(role, str) or role not in _READERS:
            return (
                f"messages[{i}]: the role {role!r} is not supported "
                "(system, developer, user, assistant or tool)"
            )
        error = _READERS[role](m, role, c)
        if error is not None:
            return f"messages[{i}]: {error}"
    if not c.convo or c.convo[-1]["role"] not in ("user", "tool"):
        return "messages must end with a user message or with tool results"
    if c.convo[-1]["role"] == "user" and not c.text and not c.images:
        return "the last user message is empty"
    if c.convo[-1]["role"] == "tool":
        c.text, c.images = "", []
    return c


def parse_request(body: dict) -> tuple[str, list[MediaItem], dict[str, Any]] | str:
    """A chat completions request → (the text and images of its last user message, the
    ``InboundMessage.api`` data the core turns into the turn); or an error message.

    System and developer messages become ``instructions``; the other messages are kept
    in order, reduced to what the model needs (bot.conversation.api)."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "messages must be a non-empty list"
    c = _read_messages(messages)
    if isinstance(c, str):
        return c
    tools = parse_tools(body)
    if isinstance(tools, str):
        return tools
    params = parse_params(body)
    if isinstance(params, str):
        return params
    if tools[1] is not None:
        params["tool_choice"] = tools[1]
    api: dict[str, Any] = {
        "instructions": "\n\n".join(c.instructions),
        "messages": c.convo,
        "tools": tools[0],
        "params": params,
        "stateless": not body.get("user"),
    }
    model = body.get("model")
    if isinstance(model, str) and model:  # ``chela/<agent id>`` chooses the agent
        api["model"] = model[:200]
    return c.text, c.images, api


def decode_data_url(url: str) -> bytes:
    head, sep, payload = url[5:].partition(",")
    if not sep:
        raise ValueError("not a data URL")
    if head.lower().endswith(";base64"):
        return base64.b64decode("".join(payload.split()), validate=True)
    return unquote_to_bytes(payload)
