"""An OpenAI request body as the route path needs it: model, prompt blocks, token estimate.

The body is parsed and checked once (:func:`sim.emulator.openai_api.parse_generation`, the
emulator's own reading of the protocol). The prompt — a completion's text or token ids, or a
chat's messages in a template shape — is cut into character blocks and hashed
(:func:`placement.domain.prefix.hash_text`), as ``POST /v1/route`` does for text: the gateway
does not tokenize, which would cost more than the rest of its work. A streamed request is sent
upstream with ``stream_options.include_usage`` so the gateway learns its token counts; the usage
event is taken out again when the client did not ask for it.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

import orjson

from placement.domain.llm import get_model, text_token_estimate
from placement.domain.prefix import hash_text
from placement.errors import InputError
from serving.gateway.errors import GatewayError
from sim.emulator import openai_api as api

MAX_CHARS_PER_TOKEN = 8  # no real text averages more; a prompt longer than this bound is refused


@dataclass(frozen=True, slots=True, kw_only=True)
class ProxyRequest:
    kind: api.Kind
    path: str
    gen: api.Generation
    body: dict[str, Any]  # as the client sent it
    block_hashes: tuple[int, ...]
    input_tokens: int  # estimated
    deterministic: bool  # temperature 0: the same request gets the same answer
    upstream_body: bytes
    client_wants_usage: bool


def parse_request(path: str, raw: bytes, *, block_chars: int) -> ProxyRequest:
    """Read and check an OpenAI request body; :class:`GatewayError` (400) when malformed."""
    kind: api.Kind = "chat" if path == api.CHAT else "completion"
    try:
        body = orjson.loads(raw)  # a fifth of json's time on a long prompt
    except orjson.JSONDecodeError as exc:
        raise GatewayError(400, f"the body is not valid JSON: {exc}") from None
    if not isinstance(body, dict):
        raise GatewayError(400, "the body must be a JSON object")
    try:
        gen = api.parse_generation(kind, body)
    except api.ApiError as exc:
        raise GatewayError(exc.status, exc.message, param=exc.param, code=exc.code) from None
    if gen.prompt is not None:
        text = gen.prompt
        estimate = text_token_estimate(len(text), gen.model, gen.max_tokens)
        least = len(text) // MAX_CHARS_PER_TOKEN
    else:
        assert gen.prompt_tokens is not None
        text = ",".join(map(str, gen.prompt_tokens))
        estimate = least = len(gen.prompt_tokens)
    _check_context(gen, least)
    temperature = body.get("temperature")
    deterministic = (
        isinstance(temperature, int | float) and not isinstance(temperature, bool)
    ) and temperature == 0
    upstream = raw
    if gen.stream and not gen.include_usage:
        upstream = _asking_for_usage(raw, body)
    return ProxyRequest(
        kind=kind,
        path=path,
        gen=gen,
        body=body,
        block_hashes=hash_text(text, block_chars),
        input_tokens=max(1, estimate),
        deterministic=deterministic,
        upstream_body=upstream,
        client_wants_usage=gen.include_usage,
    )


_USAGE_OPTION = b'"stream_options":{"include_usage":true}'
_PRIORITY = b'"priority"'


def with_priority(raw: bytes, priority: int) -> bytes:
    """The upstream body sent with vLLM's ``priority`` (the router's, over any the client
    set): put first in the bytes as they are, or the body encoded anew when it names one."""
    if _PRIORITY not in raw:
        start = raw.index(b"{") + 1  # parsed as a JSON object: it opens with a brace
        empty = raw[start:].lstrip().startswith(b"}")
        member = b'"priority":' + str(priority).encode()
        return raw[:start] + member + (b"" if empty else b",") + raw[start:]
    body = orjson.loads(raw)
    body["priority"] = priority
    return orjson.dumps(body)


def _asking_for_usage(raw: bytes, body: dict[str, Any]) -> bytes:
    """The body with ``stream_options.include_usage`` set. Without ``stream_options`` the
    member is put in the client's bytes as they are (encoding a long prompt again cost a fifth
    of the gateway's time on the Mooncake slice); otherwise the body is encoded anew."""
    if "stream_options" not in body:
        start = raw.index(b"{") + 1  # parsed as a JSON object: it opens with a brace
        empty = raw[start:].lstrip().startswith(b"}")
        return raw[:start] + _USAGE_OPTION + (b"" if empty else b",") + raw[start:]
    options = dict(body.get("stream_options") or {})
    options["include_usage"] = True
    return json.dumps({**body, "stream_options": options}).encode()


def _check_context(gen: api.Generation, least_tokens: int) -> None:
    try:
        context = get_model(gen.model).context_tokens
    except InputError:
        return  # a model outside the catalogue: its replicas judge the length
    if least_tokens + gen.max_tokens > context:
        raise GatewayError(
            400,
            f"the prompt (at least {least_tokens} tokens) plus max_tokens ({gen.max_tokens}) "
            f"exceeds the context window of {gen.model} ({context} tokens)",
            param="prompt" if least_tokens > context else "max_tokens",
            code="context_length_exceeded",
        )


def cache_key(tenant: str, request: ProxyRequest) -> bytes:
    """The result-cache key of a deterministic request: a digest of the tenant, the endpoint
    and the canonical body (same model, prompt and parameters ⇔ same key)."""
    canonical = json.dumps(request.body, sort_keys=True, separators=(",", ":"))
    text = f"{tenant}\x00{request.path}\x00{canonical}"
    return hashlib.blake2b(text.encode(), digest_size=16).digest()
