"""The OpenAI embeddings protocol (``POST /v1/embeddings``), as vLLM serves a pooling model.

:func:`parse_embedding` turns a request body into an :class:`EmbeddingRequest` — ``input`` as
one string, a list of strings, one list of token ids or a list of them; ``encoding_format``
``float`` or ``base64`` (little-endian float32, what the ``openai`` client asks for by default);
``dimensions`` to shorten the vector — or raises :class:`~sim.emulator.openai_api.ApiError`
naming the parameter. :func:`embedding_vector` is the emulator's stand-in for a model: a unit
vector that depends only on the input, so the same text always gets the same embedding and a
test can tell which answer belongs to which input. :func:`embeddings_body` writes the answer.
"""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from sim.emulator.openai_api import ApiError

EMBEDDINGS = "/v1/embeddings"
MAX_INPUTS = 2048  # OpenAI's limit on inputs per request

EncodingFormat = Literal["float", "base64"]
Input = str | tuple[int, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class EmbeddingRequest:
    model: str
    inputs: tuple[Input, ...]
    encoding_format: EncodingFormat = "float"
    dimensions: int | None = None


def parse_embedding(body: dict[str, Any]) -> EmbeddingRequest:
    """The embeddings ``body`` asks for; ``ApiError(400)`` naming the parameter otherwise."""
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise ApiError(400, "'model' is required (a string)", param="model")
    inputs = parse_inputs(body.get("input"))
    encoding: EncodingFormat
    match body.get("encoding_format"):
        case None | "float":
            encoding = "float"
        case "base64":
            encoding = "base64"
        case _:
            raise ApiError(
                400, "'encoding_format' must be 'float' or 'base64'", param="encoding_format"
            )
    dimensions = body.get("dimensions")
    if dimensions is not None and (
        isinstance(dimensions, bool) or not isinstance(dimensions, int) or dimensions < 1
    ):
        raise ApiError(400, "'dimensions' must be an integer ≥ 1", param="dimensions")
    return EmbeddingRequest(
        model=model, inputs=inputs, encoding_format=encoding, dimensions=dimensions
    )


def parse_inputs(raw: object) -> tuple[Input, ...]:
    """``input`` as the pooling endpoints take it (``ApiError(400)`` otherwise)."""
    if isinstance(raw, str):
        raw = [raw]
    elif isinstance(raw, list) and raw and all(_is_token(t) for t in raw):
        raw = [raw]  # one prompt as token ids
    if not isinstance(raw, list) or not raw:
        raise ApiError(
            400,
            "'input' must be a string, a list of strings, a list of token ids or a list of them",
            param="input",
        )
    if len(raw) > MAX_INPUTS:
        raise ApiError(400, f"at most {MAX_INPUTS} inputs per request", param="input")
    out: list[Input] = []
    for i, item in enumerate(raw):
        if isinstance(item, str) and item:
            out.append(item)
        elif isinstance(item, list) and item and all(_is_token(t) for t in item):
            out.append(tuple(item))
        else:
            raise ApiError(
                400,
                f"input[{i}] must be a non-empty string or a non-empty list of token ids",
                param="input",
            )
    return tuple(out)


def _is_token(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def input_chars(item: Input) -> int:
    """An input's length as the token estimate reads it (token ids count four characters)."""
    return len(item) if isinstance(item, str) else 4 * len(item)


def embedding_vector(item: Input, size: int) -> np.ndarray[Any, np.dtype[np.float32]]:
    """A unit vector of ``size`` float32 determined by the input alone."""
    text = item if isinstance(item, str) else ",".join(map(str, item))
    seed = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")
    vector = np.random.default_rng(seed).standard_normal(size).astype(np.float32)
    norm = float(np.linalg.norm(vector))
    return vector / norm if norm > 0 else vector


def encode_vector(vector: np.ndarray[Any, np.dtype[np.float32]], fmt: EncodingFormat) -> Any:
    """A vector as the answer carries it: a list of floats, or base64 of float32 bytes."""
    if fmt == "base64":
        return base64.b64encode(vector.astype("<f4").tobytes()).decode()
    return [float(x) for x in vector]


def embeddings_body(model: str, encoded: list[Any], prompt_tokens: int) -> bytes:
    """The whole answer: one ``embedding`` object per input, in order, and the usage."""
    data = [{"object": "embedding", "index": i, "embedding": e} for i, e in enumerate(encoded)]
    usage = {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens}
    return json.dumps({"object": "list", "data": data, "model": model, "usage": usage}).encode()
