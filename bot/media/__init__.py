"""Images, voice notes and files reaching the model.

Two halves:

* **Intake** (``prepare_inbound``), once per turn, after the conversation has downloaded an
  admitted sender's attachments: images are checked from their bytes, turned upright
  (EXIF), resized to ``media.image_max_px`` and saved next to the download; voice notes
  and audio are transcribed (litellm ``atranscription``); text documents and PDFs are
  inlined as untrusted data, or saved where the session's file tools can read them when
  they are long.  What it returns goes into the user turn: text for the ``[Message]``
  body, notes for the metadata block, document blocks, and *references* to the resized
  images (path and name), stored with the user message instead of any image bytes.
* **Request assembly** (``request_messages``), before every model call: the stored
  references of the last ``media.images_in_history`` user turns become base64
  ``image_url`` parts when the model can see, older ones a short ``[image: name]``
  placeholder, and a blind model gets ``[image attached: name, this model cannot see
  images]``.  A provider that rejects images (``is_image_rejection``) makes the loop send
  the turn again without them, and the model is remembered as blind for the process
  lifetime (``mark_blind``).

Pillow and pypdf are imported lazily: a turn without attachments never loads them.
"""

from bot.media.audio import _upload_name, audio_duration, format_duration, transcribe
from bot.media.documents import (
    is_pdf,
    is_text_like,
    read_text_file,
    save_to_inbox,
)
from bot.media.images import (
    JPEG_QUALITY,
    ImageOut,
    NotAnImage,
    process_image,
    sniff_image,
)
from bot.media.intake import Prepared, prepare_inbound
from bot.media.pdf import pdf_text
from bot.media.policy import (
    _BLIND,
    MediaPolicy,
    has_image_parts,
    image_label,
    is_image_rejection,
    mark_blind,
    model_supports_vision,
    policy_for,
    request_messages,
)
from bot.media.remote import fetch_image_url
from bot.media.speech import _voice_text_markers, speak, speak_plan

__all__ = [
    "JPEG_QUALITY",
    "_BLIND",
    "ImageOut",
    "MediaPolicy",
    "NotAnImage",
    "Prepared",
    "_upload_name",
    "_voice_text_markers",
    "audio_duration",
    "fetch_image_url",
    "format_duration",
    "has_image_parts",
    "image_label",
    "is_image_rejection",
    "is_pdf",
    "is_text_like",
    "mark_blind",
    "model_supports_vision",
    "pdf_text",
    "policy_for",
    "prepare_inbound",
    "process_image",
    "read_text_file",
    "request_messages",
    "save_to_inbox",
    "sniff_image",
    "speak",
    "speak_plan",
    "transcribe",
]
