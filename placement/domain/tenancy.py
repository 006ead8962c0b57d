"""Tenants and request classes as configuration: a YAML file an operator writes.

```yaml
classes:                       # optional: the defaults are interactive and batch
  interactive: {priority: 0, ttft_slo_s: 2.0, tpot_slo_s: 0.1, sheddable: false}
tenants:
  acme:
    credit_share: 0.5          # guaranteed share of fleet capacity, 0..1
    burst_cap: 1.0             # most of the fleet it may take when others are idle
    weight: 1.0
    models: [llama-3-8b]       # optional: the models it may use (default: all)
    traffic_share: 0.6         # optional: share of a trace's requests it sends (benchmarks)
    source: azure-code         # optional: the shipped workload its requests come from (benchmarks)
```

With a ``source`` for every tenant the file is a workload of its own (a *tenant mix*,
:mod:`sim.workloads.tenant_mix`): each tenant sends the requests of its source, thinned so that
the tenants' request counts stand in their ``traffic_share`` ratio.

Credit shares may not add up to more than 1 (they are guarantees); every error names the file
and the field.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from placement.domain.requests import DEFAULT_CLASSES, RequestClass, Tenant
from placement.errors import InputError, read_text

CREDIT_TOLERANCE = 1e-9


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ClassSpec(_Strict):
    priority: int = Field(ge=0)
    ttft_slo_s: float = Field(gt=0)
    tpot_slo_s: float = Field(gt=0)
    sheddable: bool = False


class TenantSpec(_Strict):
    credit_share: float = Field(default=0.0, ge=0, le=1)
    burst_cap: float = Field(default=1.0, ge=0, le=1)
    weight: float = Field(default=1.0, gt=0)
    models: tuple[str, ...] | None = None
    traffic_share: float | None = Field(default=None, gt=0, le=1)
    source: str | None = Field(default=None, min_length=1)


class _TenancyDoc(_Strict):
    classes: dict[str, ClassSpec] = Field(default_factory=dict)
    tenants: dict[str, TenantSpec] = Field(min_length=1)


@dataclass(frozen=True, slots=True, kw_only=True)
class Tenancy:
    """Who may use the fleet, with which credits, under which request classes."""

    tenants: Mapping[str, Tenant]
    classes: Mapping[str, RequestClass] = field(default_factory=lambda: dict(DEFAULT_CLASSES))
    models: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # absent: every model
    traffic_shares: Mapping[str, float] = field(default_factory=dict)
    sources: Mapping[str, str] = field(default_factory=dict)  # tenant → workload (a mix)

    def may_use(self, tenant: str, model: str) -> bool:
        allowed = self.models.get(tenant)
        return allowed is None or model in allowed


def tenancy_from_dict(raw: Any, *, source: str = "<tenants>") -> Tenancy:
    """A tenancy from a parsed document; InputError naming ``source`` and the field."""
    if not isinstance(raw, dict):
        raise InputError(
            "a tenants file must be a mapping", source=source, expected="a 'tenants' key"
        )
    try:
        doc = _TenancyDoc.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        message = "unknown field (a typo?)" if first["type"] == "extra_forbidden" else first["msg"]
        raise InputError(message, source=source, field=where, expected=_expected(first)) from None
    for name, t in doc.tenants.items():
        if not name.strip():
            raise InputError("a tenant needs a name", source=source, field="tenants")
        if t.burst_cap + CREDIT_TOLERANCE < t.credit_share:
            raise InputError(
                f"burst_cap {t.burst_cap:g} is below credit_share {t.credit_share:g}",
                source=source,
                field=f"tenants.{name}.burst_cap",
                expected="burst_cap ≥ credit_share",
            )
    total = sum(t.credit_share for t in doc.tenants.values())
    if total > 1.0 + CREDIT_TOLERANCE:
        raise InputError(
            f"credit shares sum to {total:g}",
            source=source,
            field="tenants",
            expected="at most 1: they are shares of one fleet",
        )
    shares = {n: t.traffic_share for n, t in doc.tenants.items() if t.traffic_share is not None}
    if shares and len(shares) != len(doc.tenants):
        missing = sorted(set(doc.tenants) - set(shares))
        raise InputError(
            f"traffic_share given for some tenants but not {', '.join(missing)}",
            source=source,
            field=f"tenants.{missing[0]}.traffic_share",
            expected="a share for every tenant, or for none",
        )
    sources = {n: t.source for n, t in doc.tenants.items() if t.source is not None}
    if sources and len(sources) != len(doc.tenants):
        missing = sorted(set(doc.tenants) - set(sources))
        raise InputError(
            f"source given for some tenants but not {', '.join(missing)}",
            source=source,
            field=f"tenants.{missing[0]}.source",
            expected="a source for every tenant, or for none",
        )
    classes = dict(DEFAULT_CLASSES)
    classes.update(
        {
            name: RequestClass(
                name=name,
                priority=c.priority,
                ttft_slo_s=c.ttft_slo_s,
                tpot_slo_s=c.tpot_slo_s,
                sheddable=c.sheddable,
            )
            for name, c in doc.classes.items()
        }
    )
    return Tenancy(
        tenants={
            name: Tenant(
                name=name, credit_share=t.credit_share, burst_cap=t.burst_cap, weight=t.weight
            )
            for name, t in doc.tenants.items()
        },
        classes=classes,
        models={n: t.models for n, t in doc.tenants.items() if t.models is not None},
        traffic_shares=shares,
        sources=sources,
    )


def load_tenancy(path: str | Path) -> Tenancy:
    """Read a tenants file (YAML); every error names the file and the field."""
    p = Path(path)
    text = read_text(p, "tenants file")
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise InputError(
            f"not valid YAML: {getattr(exc, 'problem', exc)}",
            source=str(p),
            line=mark.line + 1 if mark is not None else None,
        ) from None
    return tenancy_from_dict(raw, source=str(p))


def load_tenants(path: str | Path) -> dict[str, Tenant]:
    """Just the declared tenants of a tenants file (their credits, caps and weights)."""
    return dict(load_tenancy(path).tenants)


def _expected(error: Any) -> str | None:
    ctx = error.get("ctx") or {}
    if "ge" in ctx or "gt" in ctx or "le" in ctx:
        return ", ".join(f"{k} {v}" for k, v in ctx.items())
    return None
