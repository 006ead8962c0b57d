"""``POST /v1/outcomes``: routers report how routed requests went (TTFT, tokens, errors)."""

from __future__ import annotations

from fastapi import APIRouter

from serving.api.deps import ServiceDep, TelemetryCaller
from serving.api.responses import AUTH, JSON_BODY, problems
from serving.api.schemas import OutcomesRequest, OutcomesResponse
from serving.service import UnknownDecision

router = APIRouter(prefix="/v1", tags=["outcomes"])

# settling a decision releases its in-flight slot and charges its tenant's tokens
WHO_MAY_REPORT = (
    "Who may report a decision's outcome: a tenant-scoped key, its own tenant's decisions "
    "only; a fleet-wide key with the `telemetry` scope (a reporter for the whole fleet), any "
    "decision; a fleet-wide key with only the `route` scope, the decisions it asked for itself. "
    "A decision the caller may not report is listed as unknown, as one that is not in flight: "
    "a key learns nothing of other callers' decisions."
)


@router.post(
    "/outcomes",
    response_model=OutcomesResponse,
    responses=problems(*AUTH, *JSON_BODY),
    summary="Report completions of routed requests",
    description=WHO_MAY_REPORT,
)
async def report_outcomes(
    body: OutcomesRequest, service: ServiceDep, principal: TelemetryCaller
) -> OutcomesResponse:
    accepted, unknown = 0, []
    for outcome in body.outcomes:
        try:
            lease = service.lease(outcome.decision_id)
            if not principal.may_report_for(tenant=lease.query.tenant, routed_by=lease.routed_by):
                raise UnknownDecision(outcome.decision_id)
            if outcome.ttft_s is not None:
                service.first_token(outcome.decision_id)
            service.complete(
                outcome.decision_id,
                output_tokens=outcome.output_tokens,
                ok=outcome.error is None,
                ttft_s=outcome.ttft_s,
            )
        except UnknownDecision:
            unknown.append(outcome.decision_id)
            continue
        accepted += 1
    return OutcomesResponse(accepted=accepted, unknown=unknown)
