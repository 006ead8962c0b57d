"""The error answers an operation documents: every one is a :class:`~serving.api.schemas.Problem`.

Routes declare theirs with :func:`problems` so that the OpenAPI document lists each status an
operation can answer, with one schema for all of them (FastAPI's own ``HTTPValidationError``
is never declared: a declared 422 replaces it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from serving.api.schemas import Problem

Responses = dict[int | str, dict[str, Any]]

DESCRIPTIONS: Mapping[int, str] = {
    401: "missing or invalid API key",
    403: "the key lacks the scope, or acts for another tenant",
    404: "not found",
    409: "conflict with the service's configuration",
    413: "request body too large",
    415: "request body not JSON (Content-Type)",
    422: "invalid request: what is wrong with it, field by field",
    429: "refused by admission; see Retry-After",
    503: "the service cannot answer now",
}
AUTH = (401, 403)
JSON_BODY = (413, 415, 422)


def problems(*statuses: int, described: Mapping[int, str] | None = None) -> Responses:
    """``statuses`` (and those of ``described``, with their own description) as Problem
    answers."""
    described = dict(described or {})
    out: Responses = {}
    for status in sorted({*statuses, *described}):
        text = described.get(status) or DESCRIPTIONS[status]
        out[status] = {"model": Problem, "description": text}
    return out
