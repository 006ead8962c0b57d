"""``GET /v1/usage``: each tenant's credits used, goodput and SLO attainment. A tenant's own
key reads its own usage and nobody else's; an operator's key (fleet-wide, ``admin``,
``telemetry`` or ``metrics`` scope) reads everyone's."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Path

from serving.api.admin_schemas import NAME_PATTERN, UsageOut
from serving.api.deps import RuntimeDep, requires
from serving.api.responses import AUTH, problems
from serving.api.security import Principal
from serving.service import PlacementService
from serving.usage import TenantUsage

router = APIRouter(prefix="/v1/usage", tags=["usage"])
UsageReader = Annotated[Principal, Depends(requires("route", "telemetry", "admin", "metrics"))]
OPERATOR_SCOPES = frozenset({"admin", "telemetry", "metrics"})


def _out(service: PlacementService, usage: TenantUsage) -> UsageOut:
    counters = service.admission.vtc.counters
    return UsageOut(
        tenant=usage.tenant,
        credit_share=usage.credit_share,
        requests=usage.requests,
        refused=usage.refused,
        completed=usage.completed,
        failed=usage.failed,
        prompt_tokens=usage.prompt_tokens,
        output_tokens=usage.output_tokens,
        charged_tokens=usage.charged_tokens,
        share_used=usage.share_used,
        credit_counter=counters.get(usage.tenant),
        slo_judged=usage.slo_judged,
        slo_met=usage.slo_met,
        slo_attainment=usage.slo_attainment,
        goodput_rps=usage.goodput_rps,
        since=usage.since,
    )


def _views(service: PlacementService) -> list[TenantUsage]:
    return service.usage.views(service.credit_shares())


@router.get(
    "",
    response_model=list[UsageOut],
    responses=problems(*AUTH),
    summary="Usage of every tenant (an operator), or of the key's own tenant",
)
async def all_usage(runtime: RuntimeDep, principal: UsageReader) -> list[UsageOut]:
    service = runtime.service
    if principal.tenant is not None:
        shares = service.credit_shares()
        own = service.usage.view(principal.tenant, credit_share=shares.get(principal.tenant, 0))
        return [_out(service, own)]
    if not principal.scopes & OPERATOR_SCOPES:
        raise HTTPException(403, "reading every tenant's usage needs an operator's key")
    return [_out(service, u) for u in _views(service)]


@router.get(
    "/{tenant}",
    response_model=UsageOut,
    responses=problems(*AUTH, 422),
    summary="One tenant's usage (its own key, or an operator's)",
)
async def tenant_usage(
    runtime: RuntimeDep,
    principal: UsageReader,
    tenant: str = Path(pattern=NAME_PATTERN),
) -> UsageOut:
    if principal.tenant is not None and principal.tenant != tenant:
        raise HTTPException(403, f"this key reads only tenant '{principal.tenant}'")
    if principal.tenant is None and not principal.scopes & OPERATOR_SCOPES:
        raise HTTPException(403, "reading another tenant's usage needs an operator's key")
    service = runtime.service
    shares = service.credit_shares()
    return _out(service, service.usage.view(tenant, credit_share=shares.get(tenant, 0.0)))
