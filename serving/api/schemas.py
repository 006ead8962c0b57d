"""Request and response bodies of the HTTP API (pydantic; they are the OpenAPI schemas).

Request bodies are strict: a field of the wrong JSON type (``"64"`` or ``true`` for a number,
``1.5`` for an integer, ``1`` for a string) is refused with 422 rather than coerced, and unknown
fields are refused. As in JSON Schema, an integer may be written ``64.0``. Every error answer
is a :class:`Problem`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from placement.domain.accelerators import accelerator_names

HASH_LIMIT = 1 << 63
MAX_BLOCKS = 8192  # 4M tokens of 512-token blocks: beyond any context window
MAX_BATCH = 256
MAX_OUTCOMES = 1024
MAX_REPLICAS_PER_KIND = 100_000
MAX_DEMAND_SCALE = 1000.0


def _integral(value: object) -> object:
    # JSON Schema's "integer" is any number without a fraction: 64.0 is one, 64.5 is not
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


# after an int's bounds (pydantic states bounds placed after a validator as unknown keywords)
AS_INTEGER = BeforeValidator(_integral)
Name = Annotated[str, Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9._:/@+-]+$")]
# a 63-bit hash: stated as an inclusive int64 bound, which JSON tools read exactly (an
# exclusive 2**63 is a float to some, and lets 2**63 + k through their checks)
# a replica id is a path segment (DELETE /v1/replicas/{id}): no "/", and not "." or ".."
REPLICA_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:@+-]*$"
ReplicaId = Annotated[str, Field(min_length=1, max_length=128, pattern=REPLICA_ID_PATTERN)]
BlockHash = Annotated[
    int, Field(ge=0, le=HASH_LIMIT - 1, json_schema_extra={"format": "int64"}), AS_INTEGER
]


def _integral_items(value: object) -> object:
    # _integral over a list, in C when no item is a float (the common case: a chain of hashes)
    if isinstance(value, list) and float in set(map(type, value)):
        return [_integral(v) for v in value]
    return value


# a chain of block hashes: BlockHash with the float check once per list, not once per item
_StrictBlockHash = Annotated[
    int, Field(ge=0, le=HASH_LIMIT - 1, json_schema_extra={"format": "int64"})
]
BlockHashes = Annotated[list[_StrictBlockHash], BeforeValidator(_integral_items)]
ACCELERATORS = accelerator_names()


def _known_accelerator(kind: str) -> str:
    if kind not in ACCELERATORS:
        raise ValueError(
            f"unknown accelerator '{kind}' (expected one of {', '.join(ACCELERATORS)})"
        )
    return kind


Accelerator = Annotated[
    str, AfterValidator(_known_accelerator), Field(json_schema_extra={"enum": list(ACCELERATORS)})
]


def _names_as_keys(schema: dict[str, Any]) -> None:
    """pydantic states a ``dict[Name, V]`` as ``patternProperties``, which lets keys that miss
    the pattern through in JSON Schema; state it as ``propertyNames`` as pydantic enforces it."""
    for pattern, value in schema.pop("patternProperties", {}).items():
        schema["additionalProperties"] = value
        schema.setdefault("propertyNames", {})["pattern"] = pattern


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


# The cross-field rules of RouteRequest, stated in the JSON schema too so that a client (or a
# fuzzer) generating from the OpenAPI document sends only what the service accepts.
_PRESENT_PROMPT = {"required": ["prompt"], "properties": {"prompt": {"type": "string"}}}
_PRESENT_TOKENS = {
    "required": ["input_tokens"],
    "properties": {"input_tokens": {"type": "integer"}},
}
_PRESENT_HASHES = {"required": ["block_hashes"], "properties": {"block_hashes": {"type": "array"}}}
ROUTE_RULES: dict[str, Any] = {
    "anyOf": [_PRESENT_PROMPT, _PRESENT_TOKENS],
    "not": {"allOf": [_PRESENT_HASHES, _PRESENT_PROMPT]},
}


class RouteRequest(_Body):
    """One request to place. Give the prompt's prefix block hashes (chained, 63-bit, as
    :mod:`placement.domain.prefix` computes them), or the prompt text to be cut and hashed here
    (not both); ``input_tokens`` is required without a prompt."""

    model_config = ConfigDict(json_schema_extra=ROUTE_RULES)

    tenant: Name
    model: Name
    request_class: str = Field(default="interactive", min_length=1, max_length=64)
    block_hashes: BlockHashes | None = Field(default=None, max_length=MAX_BLOCKS)
    prompt: str | None = None
    input_tokens: Annotated[int, Field(ge=0, le=10_000_000), AS_INTEGER] | None = Field(
        default=None, description="prompt tokens (estimated from the text)"
    )
    max_output_tokens: Annotated[int, Field(ge=0, le=1_000_000), AS_INTEGER] = 256

    @model_validator(mode="after")
    def _one_prefix(self) -> RouteRequest:
        if self.block_hashes is not None and self.prompt is not None:
            raise ValueError("give block_hashes or prompt, not both")
        if self.input_tokens is None and self.prompt is None:
            raise ValueError("input_tokens is required without a prompt")
        return self


class FallbackTarget(BaseModel):
    replica_id: str
    address: str


class RouteResponse(BaseModel):
    decision_id: str = Field(description="quote it when reporting the outcome")
    replica_id: str
    address: str
    reason: str = Field(description="plan, or fallback:<why>")
    plan_version: int | None
    predicted_ttft_s: float
    fallbacks: list[FallbackTarget] = Field(description="further replicas, in order")
    priority: int | None = Field(
        default=None,
        description="the engine priority to send the request with (vLLM's `priority`, lower "
        "first), only when the service sets one (PLACEMENT_ENGINE_PRIORITY)",
    )


class FieldError(BaseModel):
    """One thing wrong with a request: where (``loc``, from ``body``, ``path`` or ``query``),
    what (``msg``) and its kind (``type``, pydantic's error type)."""

    loc: list[str | int]
    msg: str
    type: str


class Problem(BaseModel):
    """Every error answer (4xx, 5xx): the reason in words, or for an invalid request the list
    of what is wrong with it; ``retry_after_s`` when the request may be retried later."""

    detail: str | list[FieldError]
    retry_after_s: int | None = None


class BatchRouteRequest(_Body):
    requests: list[RouteRequest] = Field(min_length=1, max_length=MAX_BATCH)


class BatchItem(BaseModel):
    status: int = Field(description="200, or the status the single route would have answered")
    decision: RouteResponse | None = None
    detail: str | None = None
    retry_after_s: int | None = None


class BatchRouteResponse(BaseModel):
    results: list[BatchItem]


class Outcome(_Body):
    """How a routed request went, reported by the router that sent it."""

    decision_id: str = Field(min_length=1, max_length=128)
    ttft_s: float | None = Field(default=None, ge=0, le=86_400)
    output_tokens: Annotated[int, Field(ge=0, le=10_000_000), AS_INTEGER] = 0
    error: str | None = Field(default=None, max_length=1024)


class OutcomesRequest(_Body):
    outcomes: list[Outcome] = Field(min_length=1, max_length=MAX_OUTCOMES)


class OutcomesResponse(BaseModel):
    accepted: int
    unknown: list[str] = Field(description="decisions not in flight here (expired, or elsewhere)")


class ReplicaIn(_Body):
    id: ReplicaId
    address: str = Field(min_length=1, max_length=256, pattern=r"^[A-Za-z0-9._:/\[\]-]+$")
    model: Name
    accelerator: Accelerator
    tp: Annotated[int, Field(ge=1, le=64), AS_INTEGER] = 1
    kv_capacity_tokens: Annotated[int, Field(ge=1, le=1 << 40), AS_INTEGER]
    metrics_url: str | None = Field(default=None, max_length=512, pattern=r"^https?://\S+$")
    labels: dict[str, str] = Field(default_factory=dict, max_length=64)


class ReplicaOut(BaseModel):
    id: str
    address: str
    model: str
    accelerator: str
    tp: int
    kv_capacity_tokens: int
    healthy: bool
    in_flight: int
    num_requests_running: float
    num_requests_waiting: float
    kv_cache_usage_perc: float
    metrics_url: str
    scrape_failures: int
    labels: dict[str, str]


class SolveOut(BaseModel):
    outcome: str
    reason: str
    detail: str
    version: int | None
    solve_s: float


class WhatIfRequest(_Body):
    """A scenario solved against the current fleet and demand, off the request path."""

    replicas: dict[Name, Annotated[int, Field(ge=0, le=MAX_REPLICAS_PER_KIND), AS_INTEGER]] = Field(
        default_factory=dict,
        max_length=256,
        description="replica kind → count",
        json_schema_extra=_names_as_keys,
    )
    demand_scale: dict[Name, Annotated[float, Field(ge=0, le=MAX_DEMAND_SCALE)]] = Field(
        default_factory=dict,
        max_length=1024,
        description="tenant → demand multiplier",
        json_schema_extra=_names_as_keys,
    )
    slo_scale: float = Field(default=1.0, gt=0, le=100, description="× every TTFT/TPOT SLO")
    time_limit_s: float = Field(default=10.0, gt=0, le=3600)


class JobOut(BaseModel):
    id: str
    kind: str
    status: Literal["queued", "running", "done", "failed"]
    submitted_at: float
    finished_at: float | None
    result: dict[str, Any] | None
    error: str | None


class Health(BaseModel):
    status: str
    detail: str = ""
    # where the installed plan's capacities at SLO come from, in words: the champion model
    # version, or plainly the roofline prior (and why); empty on /readyz
    capacity: str = ""
