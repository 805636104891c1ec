"""An image for a model litellm does not know is replaced by a line of text; the log says
so once, naming media.vision = "on" (issue 27 #10).

Integration tier: it asks litellm's real model map, and importing litellm costs seconds (it
was the fast tier's slowest test, the only one that loaded litellm)."""

from __future__ import annotations

import logging

from bot.media.policy import MediaPolicy, request_messages

HINT = 'media.vision = "on"'


def _image_turn(tmp_path) -> list[dict]:
    img = tmp_path / "cat.png"
    img.write_bytes(b"\x89PNG\r\n\x1a\n" + b"0" * 64)
    ref = {"kind": "image", "path": str(img), "mime": "image/png", "name": "cat.png"}
    return [{"role": "user", "content": "what is this?", "media": [ref]}]


def test_an_unknown_model_logs_the_vision_hint_once(tmp_path, caplog):
    policy = MediaPolicy("openai/my-local-llava-27")
    with caplog.at_level(logging.WARNING, logger="chela.media"):
        for _ in range(3):
            out = request_messages(_image_turn(tmp_path), policy)
    assert "this model cannot see images" in out[0]["content"]
    hints = [r for r in caplog.records if HINT in r.getMessage()]
    assert len(hints) == 1 and "openai/my-local-llava-27" in hints[0].getMessage()


def test_vision_on_sends_the_image_and_says_nothing(tmp_path, caplog):
    policy = MediaPolicy("openai/my-local-llava-27b", vision="on")
    with caplog.at_level(logging.WARNING, logger="chela.media"):
        out = request_messages(_image_turn(tmp_path), policy)
    assert isinstance(out[0]["content"], list)
    assert not [r for r in caplog.records if HINT in r.getMessage()]
