"""The OpenAI chat-completions wire format, as quantgate reads it: a response body or a
stream chunk is validated here before any of its fields is used, so a server that sends the wrong type
(content an int, ``choices`` a string, a null choice, ``usage`` a list) ends that request as an error naming
the field, never a traceback.

Written here rather than taken from the ``openai`` package (``openai.types.chat``): those models require fields
quantgate never reads (``id``, ``created``, ``object``, an enumerated ``finish_reason``) that self-hosted servers
omit or vary, and they coerce types leniently; quantgate must be strict exactly on the fields it reads and
ignore the rest (vLLM adds ``token_ids`` and ``stop_reason``, transformers serve ``system_fingerprint``)."""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError


class _Wire(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)


W = TypeVar("W", bound=_Wire)


class Usage(_Wire):
    prompt_tokens: int | None = Field(None, ge=0)
    completion_tokens: int | None = Field(None, ge=0)


class Message(_Wire):
    content: str | None = None


class Choice(_Wire):
    index: int = 0
    message: Message
    finish_reason: str | None = None


class ChatCompletion(_Wire):
    """A whole (non-streamed) answer: some servers ignore ``stream: true``."""

    model: str
    choices: list[Choice]
    usage: Usage | None = None


class Delta(_Wire):
    content: str | None = None


class ChunkChoice(_Wire):
    index: int = 0
    delta: Delta = Field(default_factory=Delta)
    finish_reason: str | None = None


class ChatChunk(_Wire):
    """One ``data:`` event of a stream. ``choices`` is empty in the usage-only last chunk that
    ``stream_options.include_usage`` asks for."""

    model: str
    choices: list[ChunkChoice] = Field(default_factory=list)
    usage: Usage | None = None


class WireError(Exception):
    """A response quantgate cannot read as an OpenAI chat completion; ``str`` is one line."""


def parse(cls: type[W], obj: Any, what: str) -> W:
    """``obj`` validated as ``cls``, or a WireError naming the first field that is wrong and what it held."""
    try:
        return cls.model_validate(obj)
    except ValidationError as e:
        err = e.errors(include_url=False)[0]
        field = ".".join(str(p) for p in err["loc"]) or "(body)"
        got = repr(err.get("input"))
        got = got if len(got) <= 60 else got[:57] + "..."
        raise WireError(f"malformed {what}: field {field!r}: {err['msg']} (got {got})") from None


def server_error(obj: Any) -> str | None:
    """The message of an error object a server sends in place of a chunk or body: transformers serve sends
    ``{"error": "text"}`` mid-stream, vLLM and OpenAI ``{"error": {"message": ...}}``."""
    if not isinstance(obj, dict) or not obj.get("error"):
        return None
    err = obj["error"]
    msg = err.get("message", err) if isinstance(err, dict) else err
    return " ".join(str(msg).split())[:200]


def model_matches(answered: str, requested: str) -> bool:
    """Whether the response's ``model`` names the model that was asked for. transformers serve 5.17 answers a
    request for ``PATH`` with ``PATH@main`` (``ModelManager.process_model_name`` canonicalises a name without a
    revision to ``model@main``): that form is accepted, any other name is not."""
    return answered == requested or ("@" not in requested and answered == f"{requested}@main")
