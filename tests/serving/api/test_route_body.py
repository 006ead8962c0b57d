"""The plain-body reader agrees with the pydantic model on every body it accepts."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from pydantic import ValidationError

from serving.api.route_body import plain_query
from serving.api.routers.route import to_query
from serving.api.schemas import HASH_LIMIT, MAX_BLOCKS, RouteRequest

BASE: dict[str, Any] = {
    "tenant": "acme",
    "model": "llama-3-8b",
    "request_class": "interactive",
    "block_hashes": [1, 2, HASH_LIMIT - 1],
    "input_tokens": 1500,
    "max_output_tokens": 64,
}
ODD_VALUES: list[Any] = [
    None,
    True,
    0,
    -1,
    1.0,
    1.5,
    "",
    "x",
    "a b",
    "é",
    "x" * 65,
    "y" * 129,
    [],
    [1, 2],
    [True],
    [1.0],
    [-1],
    [HASH_LIMIT],
    [5, -1, 7],  # one bad hash among good ones
    [3, HASH_LIMIT, 4],
    [2, 1.0],
    [2**62, 2**62 + 1, HASH_LIMIT - 1],
    list(range(MAX_BLOCKS + 1)),
    {},
    10_000_000,
    10_000_001,
    1_000_001,
    2**64,
]


def _pydantic_query(raw: bytes) -> Any:
    try:
        return to_query(RouteRequest.model_validate_json(raw), 512)
    except ValidationError:
        return "invalid"


def _bodies() -> list[bytes]:
    out = [json.dumps(BASE).encode()]
    for field, value in itertools.product(
        [*BASE, "prompt", "extra"], ODD_VALUES
    ):  # one field set to an odd value
        out.append(json.dumps({**BASE, field: value}).encode())
    for field in BASE:  # one field missing
        out.append(json.dumps({k: v for k, v in BASE.items() if k != field}).encode())
    out += [b"", b"[]", b"{", b'"acme"', b"{}", b"null", json.dumps(BASE).encode()[:-1]]
    return out


@pytest.mark.parametrize("raw", _bodies())
def test_a_body_read_plainly_is_the_body_pydantic_reads(raw: bytes) -> None:
    query = plain_query(raw)
    if query is not None:
        assert _pydantic_query(raw) == query


def test_the_common_shapes_are_read_plainly() -> None:
    minimal = {k: BASE[k] for k in ("tenant", "model", "block_hashes", "input_tokens")}
    for body in (BASE, minimal, {**BASE, "block_hashes": []}):
        raw = json.dumps(body).encode()
        query = plain_query(raw)
        assert query is not None
        assert query == _pydantic_query(raw)
    assert plain_query(json.dumps(minimal).encode()).request_class == "interactive"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "change",
    [
        {"prompt": "hello"},  # a prompt is cut and hashed by the model's path
        {"input_tokens": 1500.0},  # an integral float is valid, but pydantic's to convert
        {"block_hashes": [1, True]},
        {"tenant": "a/b c"},
        {"unknown": 1},
    ],
)
def test_other_shapes_are_left_to_pydantic(change: dict[str, Any]) -> None:
    assert plain_query(json.dumps({**BASE, **change}).encode()) is None
