"""Bodies and answers of the admin API (tenants, request classes, their keys) and of usage.

A tenant's body is the tenants file's entry (:class:`~placement.domain.tenancy.TenantSpec`),
a class's the file's class entry (:class:`~placement.domain.tenancy.ClassSpec`): what an
operator writes in the file, the API takes as is.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from placement.domain.tenancy import ClassSpec, TenantKeySpec, TenantSpec
from serving.api.schemas import AS_INTEGER

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"


class TenantBody(TenantSpec):
    """A tenant's entry, as in the tenants file (JSON types exactly: no ``false`` for 0)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    models: list[str] | None = None  # type: ignore[assignment]
    api_keys: list[TenantKeySpec] = Field(default_factory=list)  # type: ignore[assignment]


class ClassBody(ClassSpec):
    """A request class's entry, as in the tenants file."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    priority: Annotated[int, Field(ge=0), AS_INTEGER]


class TenantIn(TenantBody):
    """A new tenant: its name and its tenants-file entry."""

    name: str = Field(pattern=NAME_PATTERN)


class TenantOut(BaseModel):
    name: str
    credit_share: float = Field(description="guaranteed share of the fleet, as applied")
    burst_cap: float
    weight: float
    models: list[str] | None = Field(description="the models it may use (null: every model)")
    keys: list[str] = Field(description="the names of its API keys")
    spec: dict[str, Any] = Field(description="its entry as declared")


class ClassOut(BaseModel):
    name: str
    priority: int
    ttft_slo_s: float
    tpot_slo_s: float
    sheddable: bool


class TenancyOut(BaseModel):
    version: int = Field(description="the stored document's version (0: never saved)")
    tenants: list[TenantOut]
    classes: list[ClassOut]


class KeyIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=NAME_PATTERN)
    scopes: list[Literal["route", "telemetry"]] = Field(default=["route"], min_length=1)


class KeyOut(BaseModel):
    tenant: str
    name: str
    scopes: list[str]
    key: str = Field(description="the key itself: shown once, only its digest is kept")
    digest: str


class UsageOut(BaseModel):
    tenant: str
    credit_share: float
    requests: int
    refused: int
    completed: int
    failed: int
    prompt_tokens: int
    output_tokens: int
    charged_tokens: float = Field(
        description="prompt tokens plus weighted output tokens, as the credit counters charge"
    )
    share_used: float = Field(description="its share of every tenant's charged tokens")
    credit_counter: float | None = Field(description="its Virtual Token Counter (fairness)")
    slo_judged: int
    slo_met: int
    slo_attainment: float | None
    goodput_rps: float = Field(description="requests within their SLO per second since `since`")
    since: float
