"""``POST /v1/outcomes``: routers report how routed requests went (TTFT, tokens, errors)."""

from __future__ import annotations

from fastapi import APIRouter

from serving.api.deps import ServiceDep, TelemetryCaller
from serving.api.schemas import OutcomesRequest, OutcomesResponse, Problem
from serving.service import UnknownDecision

router = APIRouter(prefix="/v1", tags=["outcomes"])


@router.post(
    "/outcomes",
    response_model=OutcomesResponse,
    responses={401: {"model": Problem}, 403: {"model": Problem}, 422: {"model": Problem}},
    summary="Report completions of routed requests",
)
async def report_outcomes(
    body: OutcomesRequest, service: ServiceDep, principal: TelemetryCaller
) -> OutcomesResponse:
    accepted, unknown = 0, []
    for outcome in body.outcomes:
        try:
            lease = service.lease(outcome.decision_id)
            # a tenant-scoped key must not learn of, or settle, another tenant's decisions
            if not principal.may_act_for(lease.query.tenant):
                raise UnknownDecision(outcome.decision_id)
            if outcome.ttft_s is not None:
                service.first_token(outcome.decision_id)
            service.complete(
                outcome.decision_id, output_tokens=outcome.output_tokens, ok=outcome.error is None
            )
        except UnknownDecision:
            unknown.append(outcome.decision_id)
            continue
        accepted += 1
    return OutcomesResponse(accepted=accepted, unknown=unknown)
