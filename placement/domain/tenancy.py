"""Tenants and request classes as configuration: a YAML file an operator writes.

```yaml
classes:                       # optional: the defaults are interactive and batch
  interactive: {priority: 0, ttft_slo_s: 2.0, tpot_slo_s: 0.1, sheddable: false}
tenants:
  acme:
    credit_share: 0.5          # guaranteed share of fleet capacity, 0..1, or:
    # credit_gpu_seconds: 7200 # GPU-seconds per window_s (default 3600 s) of the fleet's GPUs
    burst_cap: 1.0             # most of the fleet it may take when others are idle
    weight: 1.0
    models: [llama-3-8b]       # optional: the models it may use (default: all)
    traffic_share: 0.6         # optional: share of a trace's requests it sends (benchmarks)
    source: azure-code         # optional: the shipped workload its requests come from (benchmarks)
    request_class: interactive # optional: the class its requests come in (benchmarks; default:
                               # the class its source gives them)
    api_keys:                  # optional: tenant-scoped keys (digests: serve --hash-key KEY)
      - {name: acme-router, digest: "sha256:…", scopes: [route]}
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
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from placement.domain.requests import DEFAULT_CLASSES, RequestClass, Tenant
from placement.errors import InputError, read_text

CREDIT_TOLERANCE = 1e-9
DEFAULT_WINDOW_S = 3600.0  # the window of a credit given in GPU-seconds


@dataclass(frozen=True, slots=True)
class TenantKey:
    """A tenant-scoped API key as the tenants file declares it (only its digest)."""

    tenant: str
    name: str
    digest: str
    scopes: tuple[str, ...]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ClassSpec(_Strict):
    priority: int = Field(ge=0)
    ttft_slo_s: float = Field(gt=0)
    tpot_slo_s: float = Field(gt=0)
    sheddable: bool = False


class TenantKeySpec(_Strict):
    name: str = Field(min_length=1, max_length=128)
    digest: str = Field(pattern=r"^sha256:[0-9a-f]{64}$")
    scopes: tuple[Literal["route", "telemetry"], ...] = Field(default=("route",), min_length=1)


class TenantSpec(_Strict):
    credit_share: float = Field(default=0.0, ge=0, le=1)
    # a credit in GPU-seconds per window instead of a share (converted with the fleet's GPUs)
    credit_gpu_seconds: float | None = Field(default=None, gt=0)
    window_s: float = Field(default=DEFAULT_WINDOW_S, gt=0)
    burst_cap: float = Field(default=1.0, ge=0, le=1)
    weight: float = Field(default=1.0, gt=0)
    models: tuple[str, ...] | None = None
    traffic_share: float | None = Field(default=None, gt=0, le=1)
    source: str | None = Field(default=None, min_length=1)
    request_class: str | None = Field(default=None, min_length=1)
    api_keys: tuple[TenantKeySpec, ...] = ()


class _TenancyDoc(_Strict):
    classes: dict[str, ClassSpec] = Field(default_factory=dict)
    tenants: dict[str, TenantSpec] = Field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class Tenancy:
    """Who may use the fleet, with which credits, under which request classes."""

    tenants: Mapping[str, Tenant]
    classes: Mapping[str, RequestClass] = field(default_factory=lambda: dict(DEFAULT_CLASSES))
    models: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # absent: every model
    traffic_shares: Mapping[str, float] = field(default_factory=dict)
    sources: Mapping[str, str] = field(default_factory=dict)  # tenant → workload (a mix)
    # tenant → the class its requests come in, where the file says (a mix's tenants)
    request_classes: Mapping[str, str] = field(default_factory=dict)
    keys: tuple[TenantKey, ...] = ()
    # the validated document, as written back when the tenancy is edited and persisted
    doc: Mapping[str, Any] = field(default_factory=dict)

    def may_use(self, tenant: str, model: str) -> bool:
        allowed = self.models.get(tenant)
        return allowed is None or model in allowed


def gpu_seconds_share(gpu_seconds: float, window_s: float, fleet_gpus: float) -> float:
    """A credit of ``gpu_seconds`` per ``window_s`` as a share of a fleet of ``fleet_gpus``."""
    return gpu_seconds / (window_s * fleet_gpus)


def tenancy_from_dict(
    raw: Any,
    *,
    source: str = "<tenants>",
    fleet_gpus: float | None = None,
    allow_empty: bool = False,
) -> Tenancy:
    """A tenancy from a parsed document; InputError naming ``source`` and the field.
    ``fleet_gpus`` converts credits given in GPU-seconds into shares (without a fleet such a
    credit is refused). A file declares at least one tenant; the admin API may delete the last
    one (``allow_empty``)."""
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
    if not doc.tenants and not allow_empty:
        raise InputError("no tenants: a file declares at least 1", source=source, field="tenants")
    credit = {n: _credit_share(n, t, fleet_gpus, source) for n, t in doc.tenants.items()}
    for name, t in doc.tenants.items():
        if not name.strip():
            raise InputError("a tenant needs a name", source=source, field="tenants")
        if t.burst_cap + CREDIT_TOLERANCE < credit[name]:
            raise InputError(
                f"burst_cap {t.burst_cap:g} is below the credit share {credit[name]:g}",
                source=source,
                field=f"tenants.{name}.burst_cap",
                expected="burst_cap ≥ the credit share",
            )
    total = sum(credit.values())
    if total > 1.0 + CREDIT_TOLERANCE:
        raise InputError(
            f"credit shares sum to {total:g}",
            source=source,
            field="tenants",
            expected="at most 1: they are shares of one fleet",
        )
    shares: dict[str, float] = _all_or_none(doc, "traffic_share", "a share", source=source)
    sources: dict[str, str] = _all_or_none(doc, "source", "a source", source=source)
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
    request_classes = {
        n: t.request_class for n, t in doc.tenants.items() if t.request_class is not None
    }
    for name, cls in request_classes.items():
        if cls not in classes:
            raise InputError(
                f"request class {cls!r} is not defined",
                source=source,
                field=f"tenants.{name}.request_class",
                expected="one of " + ", ".join(sorted(classes)),
            )
    return Tenancy(
        tenants={
            name: Tenant(
                name=name, credit_share=credit[name], burst_cap=t.burst_cap, weight=t.weight
            )
            for name, t in doc.tenants.items()
        },
        classes=classes,
        models={n: t.models for n, t in doc.tenants.items() if t.models is not None},
        traffic_shares=shares,
        sources=sources,
        request_classes=request_classes,
        keys=tuple(
            TenantKey(tenant=n, name=k.name, digest=k.digest, scopes=k.scopes)
            for n, t in doc.tenants.items()
            for k in t.api_keys
        ),
        doc=doc.model_dump(mode="json", exclude_defaults=True),
    )


def _all_or_none(doc: _TenancyDoc, field: str, what: str, *, source: str) -> dict[str, Any]:
    """Each tenant's ``field``, given for every tenant or for none; InputError naming the
    first tenant without it."""
    given = {n: getattr(t, field) for n, t in doc.tenants.items() if getattr(t, field) is not None}
    if given and len(given) != len(doc.tenants):
        missing = sorted(set(doc.tenants) - set(given))
        raise InputError(
            f"{field} given for some tenants but not {', '.join(missing)}",
            source=source,
            field=f"tenants.{missing[0]}.{field}",
            expected=f"{what} for every tenant, or for none",
        )
    return given


def _credit_share(name: str, t: TenantSpec, fleet_gpus: float | None, source: str) -> float:
    if t.credit_gpu_seconds is None:
        return t.credit_share
    where = f"tenants.{name}.credit_gpu_seconds"
    if t.credit_share > 0:
        raise InputError(
            "give credit_share or credit_gpu_seconds, not both", source=source, field=where
        )
    if fleet_gpus is None or fleet_gpus <= 0:
        raise InputError(
            "a credit in GPU-seconds needs a fleet to convert it",
            source=source,
            field=where,
            expected="a service or plan with a fleet (--fleet), or credit_share",
        )
    share = gpu_seconds_share(t.credit_gpu_seconds, t.window_s, fleet_gpus)
    if share > 1.0 + CREDIT_TOLERANCE:
        raise InputError(
            f"{t.credit_gpu_seconds:g} GPU-seconds per {t.window_s:g} s is more than the "
            f"fleet's {fleet_gpus:g} GPUs have",
            source=source,
            field=where,
            expected=f"at most {fleet_gpus * t.window_s:g}",
        )
    return share


def load_tenancy(path: str | Path, *, fleet_gpus: float | None = None) -> Tenancy:
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
    return tenancy_from_dict(raw, source=str(p), fleet_gpus=fleet_gpus)


def load_tenants(path: str | Path, *, fleet_gpus: float | None = None) -> dict[str, Tenant]:
    """Just the declared tenants of a tenants file (their credits, caps and weights)."""
    return dict(load_tenancy(path, fleet_gpus=fleet_gpus).tenants)


def _expected(error: Any) -> str | None:
    ctx = error.get("ctx") or {}
    if "ge" in ctx or "gt" in ctx or "le" in ctx:
        return ", ".join(f"{k} {v}" for k, v in ctx.items())
    return None
