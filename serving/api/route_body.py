"""The common shape of a ``POST /v1/route`` body, read without pydantic.

Almost every body a router sends is the same shape: tenant, model, maybe a request class, a
chain of block hashes, input and output tokens, every value of its exact JSON type. pydantic
validating that shape is a sixth of a decision's CPU. :func:`plain_query` reads exactly that
shape with ``orjson`` and a few checks that are each at least as strict as
:class:`~serving.api.schemas.RouteRequest`'s; anything else (a prompt, a float written for an
integer, an unknown field, a value out of range, bad JSON) answers None, and the caller
validates the body with pydantic, which gives the same query or the field errors.
"""

from __future__ import annotations

import re

import orjson

from serving.api.schemas import HASH_LIMIT, MAX_BLOCKS, RouteRequest
from serving.route.query import make_query
from serving.route.types import RouteQuery

_NAME = re.compile(r"[A-Za-z0-9._:/@+-]{1,128}")
_FIELDS = frozenset(RouteRequest.model_fields) - {"prompt"}
_DEFAULT_CLASS = RouteRequest.model_fields["request_class"].default
_DEFAULT_OUTPUT = RouteRequest.model_fields["max_output_tokens"].default
_MAX_INPUT = 10_000_000
_MAX_OUTPUT = 1_000_000
_MAX_HASH = HASH_LIMIT - 1
# tenant and model names already matched against _NAME: a service sees a few of each, again
# and again (bounded, so that a stream of made-up names cannot grow it)
_NAMES_SEEN: set[str] = set()
_MAX_NAMES_SEEN = 4096


def plain_query(raw: bytes) -> RouteQuery | None:
    """The query of a body of the common shape (block hashes, no prompt); None for any other
    body, valid or not."""
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    if type(body) is not dict or not body.keys() <= _FIELDS:
        return None
    tenant = body.get("tenant")
    model = body.get("model")
    hashes = body.get("block_hashes")
    tokens = body.get("input_tokens")
    if (
        type(tenant) is not str
        or type(model) is not str
        or type(hashes) is not list
        or type(tokens) is not int
        or (tenant not in _NAMES_SEEN and _NAME.fullmatch(tenant) is None)
        or (model not in _NAMES_SEEN and _NAME.fullmatch(model) is None)
        or not 0 <= tokens <= _MAX_INPUT
        or len(hashes) > MAX_BLOCKS
    ):
        return None
    request_class = body.get("request_class", _DEFAULT_CLASS)
    output = body.get("max_output_tokens", _DEFAULT_OUTPUT)
    if (
        type(request_class) is not str
        or not 1 <= len(request_class) <= 64
        or type(output) is not int
        or not 0 <= output <= _MAX_OUTPUT
    ):
        return None
    # exact ints only (no bool, no float), each a 63-bit hash (a loop: fewer instructions than
    # a set of the types, a min and a max, or any other walk in C tried)
    for h in hashes:
        if type(h) is not int or not 0 <= h <= _MAX_HASH:
            return None
    if len(_NAMES_SEEN) < _MAX_NAMES_SEEN:
        _NAMES_SEEN.add(tenant)
        _NAMES_SEEN.add(model)
    return make_query(tenant, model, request_class, tuple(hashes), tokens, output)
