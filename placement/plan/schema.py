"""The plan: what the solver publishes and the route path reads. Immutable once published.

A plan maps each **prefix group** (keyed by the hash of its deepest block) and each
(tenant, model) **default** to weighted replicas, caps each replica's load at its capacity at
SLO, and records how it was made (solver status, objective, LP bound, gap, time) and what it
predicts (per tenant and class: attainment and the share shed).

The structure is a versioned JSON document (:data:`PLAN_SCHEMA`); :meth:`Plan.from_json`
refuses anything that does not match it, naming the field. Semantic checks (capacity,
coverage, credits) live in :mod:`placement.plan.validate`.

Block hashes are 63-bit integers (:mod:`placement.domain.prefix`), written as JSON integers.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from placement.errors import InputError

PLAN_SCHEMA = "placement.plan/v1"
WEIGHT_SUM_TOLERANCE = 1e-6

SolverStatus = Literal["optimal", "feasible", "infeasible", "time_limit", "model_invalid", "greedy"]


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Route(_Frozen):
    """Weighted replicas for one key. ``weights`` are shares of the key's traffic (sum 1);
    ``secondary`` replicas take the spill when every primary is over its cap."""

    replicas: tuple[str, ...] = Field(min_length=1)
    weights: tuple[float, ...] = Field(min_length=1)
    secondary: tuple[str, ...] = ()

    @model_validator(mode="after")
    def _weights_match(self) -> Route:
        if len(self.weights) != len(self.replicas):
            raise ValueError("weights and replicas differ in length")
        if any(w <= 0 for w in self.weights):
            raise ValueError("every weight must be > 0")
        if abs(sum(self.weights) - 1.0) > WEIGHT_SUM_TOLERANCE:
            raise ValueError(f"weights sum to {sum(self.weights):.6f}, not 1")
        if len(set(self.replicas)) != len(self.replicas):
            raise ValueError("a replica appears twice")
        return self


class PrefixGroupRoute(_Frozen):
    """A prefix hot enough to place on purpose: the trie node whose last block hash is ``key``."""

    key: int = Field(ge=0, lt=1 << 63)
    depth_blocks: int = Field(ge=1)
    tenant: str
    model: str
    rate_rps: float = Field(ge=0)
    prefix_tokens: int = Field(ge=0)
    route: Route
    warm: tuple[str, ...] = ()  # replicas asked to keep the prefix cached


class DefaultRoute(_Frozen):
    """Where a tenant's requests for a model go when no prefix group matches."""

    tenant: str
    model: str
    route: Route


class AdapterRoute(_Frozen):
    """Where a tenant's requests for a LoRA ``adapter`` on base ``model`` go: the replicas
    the plan keeps the adapter resident on (:attr:`ReplicaPlan.adapters`), or the swap
    replicas, which keep none and where cold adapters take turns in the slots."""

    tenant: str
    model: str
    adapter: str
    rate_rps: float = Field(ge=0)
    route: Route


class ReplicaPlan(_Frozen):
    id: str
    kind: str
    accelerator: str
    model: str
    load_cap_rps: float = Field(ge=0)  # capacity at SLO for the mix the plan sends it
    planned_rps: float = Field(ge=0)
    kv_budget_tokens: int = Field(ge=0)
    warm_prefix_tokens: int = Field(ge=0)  # KV the plan's warm prefixes take
    # LoRA adapters the plan keeps resident in its slots (their activities fit the slots)
    adapters: tuple[str, ...] = ()
    # the request classes it serves (the fast kinds, whose prompt chunk holds every class's
    # TPOT, kept for the classes the other kinds' chunk breaks: placement.solver.chunk_split);
    # empty: every class
    classes: tuple[str, ...] = ()


class TenantPlan(_Frozen):
    tenant: str
    demand_rps: float = Field(ge=0)
    admitted_rps: float = Field(ge=0)  # the rate the plan serves; admission's reference
    guaranteed_share: float = Field(ge=0, le=1)
    cap_share: float = Field(ge=0, le=1)
    # the same in req/s for the tenant's mix (the solver's floor on non-sheddable traffic and
    # its cap on all traffic); optional so plans written before them still parse
    guaranteed_rps: float | None = Field(default=None, ge=0)
    cap_rps: float | None = Field(default=None, ge=0)
    # the share of its admitted traffic predicted to meet its SLOs (shed traffic is not counted;
    # None: nothing admitted in the window)
    predicted_attainment: float | None = Field(default=None, ge=0, le=1)


class ClassOutcome(_Frozen):
    """Predicted outcome per tenant and request class."""

    tenant: str
    request_class: str
    demand_rps: float = Field(ge=0)
    served_rps: float = Field(ge=0)
    shed_share: float = Field(ge=0, le=1)
    # of the admitted (served) traffic, the share predicted to meet the SLO
    predicted_attainment: float = Field(ge=0, le=1)


class SolverReport(_Frozen):
    backend: str  # "cp-sat", "mathopt-highs", "greedy", …
    status: SolverStatus
    objective: float
    bound: float  # the LP relaxation's bound the gap is measured against
    gap: float = Field(ge=0)
    solve_s: float = Field(ge=0)
    time_limit_s: float = Field(ge=0)
    churn: float = Field(ge=0, default=0.0)  # share of traffic moved against the previous plan
    detail: str = ""  # what the solver said when it did not prove an optimum (status, reason)


class TimingSourceEntry(_Frozen):
    """Where one replica kind's engine timings come from (``profiles``, ``end-to-end fit`` or
    ``roofline only``) and the median error that source showed on held-out measurements."""

    accelerator: str
    model: str
    tp: int = Field(ge=1)
    source: Literal["profiles", "end-to-end fit", "roofline only"]
    expected_error: float | None = Field(default=None, ge=0)
    detail: str = ""


class Plan(_Frozen):
    schema_: Literal["placement.plan/v1"] = Field(default="placement.plan/v1", alias="schema")
    version: int = Field(ge=1)
    created_at: float = Field(ge=0)  # Unix seconds
    previous_version: int | None = None
    fleet: str
    inputs_digest: str
    # "models:/placement-latency/<v> (@champion)", "models:/placement-latency/<v>" or
    # "roofline-prior": see placement.plan.capacity_source
    capacity_source: str
    solver: SolverReport
    replicas: tuple[ReplicaPlan, ...]
    groups: tuple[PrefixGroupRoute, ...] = ()
    defaults: tuple[DefaultRoute, ...] = ()
    adapter_routes: tuple[AdapterRoute, ...] = ()
    tenants: tuple[TenantPlan, ...] = ()
    outcomes: tuple[ClassOutcome, ...] = ()
    # per replica kind, where the timings behind capacity_source come from (plans written
    # before it have none)
    timing_sources: tuple[TimingSourceEntry, ...] = ()

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), separators=(",", ":"))

    @classmethod
    def from_dict(cls, raw: Any, *, source: str = "<plan>") -> Plan:
        """Parse a plan document; anything off-schema is an :class:`InputError` naming the field."""
        if not isinstance(raw, dict):
            raise InputError("a plan must be a JSON object", source=source, expected=PLAN_SCHEMA)
        if raw.get("schema") != PLAN_SCHEMA:
            raise InputError(
                f"unsupported plan schema {raw.get('schema')!r}",
                source=source,
                field="schema",
                expected=PLAN_SCHEMA,
            )
        try:
            return cls.model_validate(raw)
        except ValidationError as exc:
            err = exc.errors()[0]
            loc = ".".join(str(p) for p in err["loc"])
            raise InputError(err["msg"], source=source, field=loc) from None

    @classmethod
    def from_json(cls, text: str | bytes, *, source: str = "<plan>") -> Plan:
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InputError(f"not valid JSON: {exc.msg}", source=source, line=exc.lineno) from None
        return cls.from_dict(raw, source=source)

    @staticmethod
    def json_schema() -> dict[str, Any]:
        """The JSON Schema of :data:`PLAN_SCHEMA` (for routers written in other languages)."""
        return Plan.model_json_schema(by_alias=True)
