"""``POST /v1/outcomes``: routers report how routed requests went (TTFT, tokens, errors)."""

from __future__ import annotations

import itertools
import time

from fastapi import APIRouter

from serving.api.deps import RuntimeDep, TelemetryCaller
from serving.api.responses import AUTH, JSON_BODY, problems
from serving.api.schemas import Outcome, OutcomesRequest, OutcomesResponse
from serving.leases import Lease
from serving.service import PlacementService, UnknownDecision
from serving.telemetry_sink import TelemetrySink, lease_row, wall_of

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
    body: OutcomesRequest, runtime: RuntimeDep, principal: TelemetryCaller
) -> OutcomesResponse:
    service = runtime.service
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
        if runtime.telemetry is not None:
            _record(runtime.telemetry, service, lease, outcome)
    return OutcomesResponse(accepted=accepted, unknown=unknown)


_request_ids = itertools.count(1)


def _record(sink: TelemetrySink, service: PlacementService, lease: Lease, o: Outcome) -> None:
    """The outcome as a ``requests`` row (not for a replica deregistered since: its details
    are gone, and a served row needs them)."""
    state = service.replicas.get(lease.replica_id)
    if state is None and o.error is None:
        return
    now = service.clock()
    e2e = max(0.0, now - lease.routed_at)
    tpot = None
    if o.ttft_s is not None and o.output_tokens > 1:
        tpot = max(0.0, e2e - o.ttft_s) / (o.output_tokens - 1)
    sink.add(
        lease_row(
            lease,
            state,
            request_id=next(_request_ids),
            routed_wall=wall_of(lease.routed_at, now),
            finished_wall=time.time(),
            ttft_s=o.ttft_s,
            tpot_s=tpot,
            output_tokens=o.output_tokens,
            error=o.error or "",
        )
    )
