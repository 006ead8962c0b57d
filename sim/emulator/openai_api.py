"""The OpenAI completions and chat-completions protocol, as vLLM serves it.

:func:`parse_generation` turns a request body into a :class:`Generation` (prompt text or token
ids, output length, streaming options) or raises :class:`ApiError`, which answers in OpenAI's
error format ``{"error": {"message", "type", "param", "code"}}``. The ``*_body`` and
``*_chunk`` functions write responses and Server-Sent-Event chunks in the shapes the ``openai``
client parses.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

COMPLETIONS = "/v1/completions"
CHAT = "/v1/chat/completions"
DEFAULT_COMPLETION_TOKENS = 16  # OpenAI's default max_tokens for /v1/completions
DEFAULT_CHAT_TOKENS = 256  # a chat request without a limit ends here (no EOS in an emulator)
DONE = b"data: [DONE]\n\n"

Kind = Literal["completion", "chat"]


class ApiError(Exception):
    """A request the server refuses: HTTP ``status`` with an OpenAI-style error body."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str = "invalid_request_error",
        param: str | None = None,
        code: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.param = param
        self.code = code

    def body(self) -> bytes:
        return error_body(self.message, type=self.type, param=self.param, code=self.code)


def error_body(
    message: str,
    *,
    type: str = "invalid_request_error",
    param: str | None = None,
    code: str | None = None,
) -> bytes:
    """OpenAI's error object as JSON bytes."""
    error = {"message": message, "type": type, "param": param, "code": code}
    return json.dumps({"error": error}).encode()


@dataclass(frozen=True, slots=True, kw_only=True)
class Generation:
    """What one request asks for."""

    kind: Kind
    model: str
    prompt: str | None  # text to tokenize, or None when ``prompt_tokens`` are given
    prompt_tokens: tuple[int, ...] | None
    max_tokens: int
    stream: bool
    include_usage: bool
    priority: int = 0  # vLLM's scheduling priority (lower first; only a priority engine's)


def parse_json(raw: bytes) -> dict[str, Any]:
    try:
        body = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ApiError(400, f"the body is not valid JSON: {exc}") from None
    if not isinstance(body, dict):
        raise ApiError(400, "the body must be a JSON object")
    return body


def parse_generation(kind: Kind, body: dict[str, Any]) -> Generation:
    """The generation ``body`` asks for; ``ApiError(400)`` naming the parameter otherwise."""
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise ApiError(400, "'model' is required (a string)", param="model")
    prompt, tokens = _chat_prompt(body) if kind == "chat" else _completion_prompt(body)
    n = body.get("n", 1)
    if n not in (1, None):
        raise ApiError(400, "only n=1 is supported", param="n")
    default = DEFAULT_CHAT_TOKENS if kind == "chat" else DEFAULT_COMPLETION_TOKENS
    limit = body.get("max_completion_tokens") if kind == "chat" else None
    if limit is None:
        limit = body.get("max_tokens")
    if limit is None:
        limit = default
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ApiError(400, "max_tokens must be an integer ≥ 1", param="max_tokens")
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise ApiError(400, "'stream' must be a boolean", param="stream")
    options = body.get("stream_options") or {}
    if not isinstance(options, dict):
        raise ApiError(400, "'stream_options' must be an object", param="stream_options")
    priority = body.get("priority", 0)
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise ApiError(400, "'priority' must be an integer", param="priority")
    return Generation(
        kind=kind,
        model=model,
        prompt=prompt,
        prompt_tokens=tokens,
        max_tokens=limit,
        stream=stream,
        include_usage=bool(options.get("include_usage", False)),
        priority=priority,
    )


def _completion_prompt(body: dict[str, Any]) -> tuple[str | None, tuple[int, ...] | None]:
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str | list):
        prompt = prompt[0]  # a batch of one
    if isinstance(prompt, str):
        return prompt, None
    if isinstance(prompt, list) and prompt and all(_is_token(t) for t in prompt):
        return None, tuple(prompt)
    raise ApiError(
        400,
        "'prompt' must be a string or a list of token ids (one prompt per request)",
        param="prompt",
    )


def _is_token(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _chat_prompt(body: dict[str, Any]) -> tuple[str, None]:
    """Messages as one prompt, in a chat-template shape: a header per turn, then its text."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ApiError(400, "'messages' must be a non-empty list", param="messages")
    parts: list[str] = []
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise ApiError(400, f"messages[{i}] needs a 'role'", param=f"messages[{i}]")
        parts.append(f"<|start|>{message['role']}\n{message_text(message, i)}<|end|>\n")
    parts.append("<|start|>assistant\n")
    return "".join(parts), None


def message_text(message: dict[str, Any], index: int) -> str:
    """A chat message's text: its ``content`` string, or its text parts joined."""
    content = message.get("content")
    if content is None or isinstance(content, str):
        return content or ""
    if isinstance(content, list):
        texts = []
        for part in content:
            if not (isinstance(part, dict) and part.get("type") == "text"):
                raise ApiError(
                    400, "only text content parts are supported", param=f"messages[{index}]"
                )
            texts.append(str(part.get("text", "")))
        return "".join(texts)
    raise ApiError(400, "'content' must be a string or a list of parts", param=f"messages[{index}]")


def usage(prompt_tokens: int, completion_tokens: int, cached_tokens: int) -> dict[str, Any]:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "prompt_tokens_details": {"cached_tokens": cached_tokens},
    }


def response_body(
    gen: Generation, request_id: str, created: int, text: str, use: dict[str, Any]
) -> bytes:
    """The whole (non-streamed) answer."""
    if gen.kind == "chat":
        choice: dict[str, Any] = {
            "index": 0,
            "message": {"role": "assistant", "content": text},
            "logprobs": None,
            "finish_reason": "length",
        }
        obj = "chat.completion"
    else:
        choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": "length"}
        obj = "text_completion"
    return json.dumps(
        {
            "id": request_id,
            "object": obj,
            "created": created,
            "model": gen.model,
            "choices": [choice],
            "usage": use,
        }
    ).encode()


def chunk(
    gen: Generation,
    request_id: str,
    created: int,
    text: str,
    *,
    first: bool = False,
    finish_reason: str | None = None,
) -> bytes:
    """One SSE event carrying ``text`` (the first chat chunk also names the role)."""
    if gen.kind == "chat":
        delta: dict[str, Any] = {"content": text}
        if first:
            delta = {"role": "assistant", "content": text}
        choice: dict[str, Any] = {
            "index": 0,
            "delta": delta,
            "logprobs": None,
            "finish_reason": finish_reason,
        }
        obj = "chat.completion.chunk"
    else:
        choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish_reason}
        obj = "text_completion"
    payload = {
        "id": request_id,
        "object": obj,
        "created": created,
        "model": gen.model,
        "choices": [choice],
    }
    return b"data: " + json.dumps(payload).encode() + b"\n\n"


def usage_chunk(gen: Generation, request_id: str, created: int, use: dict[str, Any]) -> bytes:
    """The last event when ``stream_options.include_usage``: no choices, the usage."""
    obj = "chat.completion.chunk" if gen.kind == "chat" else "text_completion"
    payload = {
        "id": request_id,
        "object": obj,
        "created": created,
        "model": gen.model,
        "choices": [],
        "usage": use,
    }
    return b"data: " + json.dumps(payload).encode() + b"\n\n"


def error_event(message: str, *, code: int = 500, type: str = "server_error") -> bytes:
    """An SSE event carrying an error (the ``openai`` client raises on it)."""
    error = {"message": message, "type": type, "param": None, "code": code}
    return b"data: " + json.dumps({"error": error}).encode() + b"\n\n"


def models_body(names: list[str], created: int) -> bytes:
    data = [
        {"id": n, "object": "model", "created": created, "owned_by": "placement", "root": n}
        for n in names
    ]
    return json.dumps({"object": "list", "data": data}).encode()
