"""What the picker reads from an OpenAI request body: the model, the prompt, the output budget.

Completions carry ``prompt``: a string, a list of strings, a list of token ids or a list of
such lists (a batch: routed as one request on their concatenation). Chat completions carry
``messages``; their text is rendered ``role: content`` per message, one per line, so that two
conversations sharing their first messages share a text prefix (and so prefix blocks), as they
share a cached prefix on the engine. A message's content is a string or a list of parts, of
which the ``text`` parts count. The output budget is ``max_completion_tokens``, else
``max_tokens``, else :data:`DEFAULT_MAX_OUTPUT_TOKENS` (the default of ``POST /v1/route``).

Anything else is a :class:`BadBody` (HTTP 400) naming the field and what was expected.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from placement.errors import InputError

DEFAULT_MAX_OUTPUT_TOKENS = 256
_EXPECTED_PROMPT = "a string, a list of strings, or token ids"


class BadBody(InputError):
    """The request body is not an OpenAI completions or chat completions body: HTTP 400."""


@dataclass(frozen=True, slots=True, kw_only=True)
class InferenceBody:
    """One OpenAI request as the picker sees it: ``prompt`` text, or ``prompt_tokens`` when the
    client sent token ids."""

    model: str
    prompt: str | None
    prompt_tokens: tuple[int, ...] | None
    max_output_tokens: int
    stream: bool


def parse_body(raw: bytes) -> InferenceBody:
    try:
        body = json.loads(raw)
    except UnicodeDecodeError:
        raise BadBody("the body is not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise BadBody(
            f"the body is not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from None
    if not isinstance(body, dict):
        raise BadBody("the body is not a JSON object", expected='{"model": …, …}')
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise BadBody("missing or not a string", field="model", expected="the model's name")
    prompt: str | None = None
    tokens: tuple[int, ...] | None = None
    if "messages" in body:
        prompt = _chat_text(body["messages"])
    elif "prompt" in body:
        prompt, tokens = _completion_prompt(body["prompt"])
    else:
        raise BadBody(
            "the body has neither 'prompt' (completions) nor 'messages' (chat completions)"
        )
    stream = body.get("stream", False)
    if not isinstance(stream, bool) and stream is not None:
        raise BadBody("not a boolean", field="stream")
    return InferenceBody(
        model=model,
        prompt=prompt,
        prompt_tokens=tokens,
        max_output_tokens=_max_output_tokens(body),
        stream=bool(stream),
    )


def _max_output_tokens(body: dict[str, Any]) -> int:
    for name in ("max_completion_tokens", "max_tokens"):
        value = body.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise BadBody("not a non-negative integer", field=name)
        return value
    return DEFAULT_MAX_OUTPUT_TOKENS


def _is_token(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _completion_prompt(prompt: object) -> tuple[str | None, tuple[int, ...] | None]:
    if isinstance(prompt, str):
        return prompt, None
    if not isinstance(prompt, list) or not prompt:
        raise BadBody("empty or of the wrong type", field="prompt", expected=_EXPECTED_PROMPT)
    if all(isinstance(p, str) for p in prompt):
        return "\n".join(prompt), None
    if all(_is_token(t) for t in prompt):
        return None, tuple(prompt)
    if all(isinstance(p, list) and all(_is_token(t) for t in p) for p in prompt):
        return None, tuple(t for p in prompt for t in p)
    raise BadBody("mixes kinds of items", field="prompt", expected=_EXPECTED_PROMPT)


def _chat_text(messages: object) -> str:
    if not isinstance(messages, list) or not messages:
        raise BadBody("empty or not a list", field="messages", expected="a list of messages")
    lines = []
    for i, message in enumerate(messages):
        if not isinstance(message, dict):
            raise BadBody("not an object", field=f"messages[{i}]")
        role = message.get("role")
        if not isinstance(role, str) or not role:
            raise BadBody("missing or not a string", field=f"messages[{i}].role")
        lines.append(f"{role}: {_content_text(message.get('content'), i)}\n")
    return "".join(lines)


def _content_text(content: object, i: int) -> str:
    if content is None or isinstance(content, str):
        return content or ""
    if not isinstance(content, list):
        raise BadBody(
            "not a string or a list of parts",
            field=f"messages[{i}].content",
        )
    texts = []
    for j, part in enumerate(content):
        if not isinstance(part, dict):
            raise BadBody("not an object", field=f"messages[{i}].content[{j}]")
        if part.get("type") == "text":
            text = part.get("text")
            if not isinstance(text, str):
                raise BadBody("not a string", field=f"messages[{i}].content[{j}].text")
            texts.append(text)
    return "".join(texts)
