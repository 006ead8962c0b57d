"""Replica registration: who the route path may send requests to, and where to scrape them."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Path, Response

from serving.api.deps import Admin, FleetReader, ServiceDep
from serving.api.responses import AUTH, JSON_BODY, problems
from serving.api.schemas import REPLICA_ID_PATTERN, ReplicaIn, ReplicaOut
from serving.route.types import ReplicaState
from serving.service import PlacementService

router = APIRouter(prefix="/v1/replicas", tags=["replicas"])
ReplicaId = Path(min_length=1, max_length=128, pattern=REPLICA_ID_PATTERN)


def _out(service: PlacementService, replica_id: str) -> ReplicaOut:
    reg = service.registrations[replica_id]
    s = reg.state
    return ReplicaOut(
        id=s.id,
        address=s.address,
        model=s.model,
        accelerator=s.accelerator,
        tp=s.tp,
        kv_capacity_tokens=s.kv_capacity_tokens,
        healthy=s.healthy,
        in_flight=s.in_flight,
        num_requests_running=s.num_requests_running,
        num_requests_waiting=s.num_requests_waiting,
        kv_cache_usage_perc=s.kv_cache_usage_perc,
        metrics_url=reg.metrics_url,
        scrape_failures=reg.scrape_failures,
        labels=dict(s.labels),
    )


@router.get(
    "", response_model=list[ReplicaOut], responses=problems(*AUTH), summary="Registered replicas"
)
async def list_replicas(service: ServiceDep, _: FleetReader) -> list[ReplicaOut]:
    return [_out(service, r) for r in sorted(service.registrations)]


@router.post(
    "",
    response_model=ReplicaOut,
    status_code=201,
    responses={
        **problems(*AUTH, *JSON_BODY),
        200: {"model": ReplicaOut, "description": "re-registered"},
    },
    summary="Register (or re-register) a replica",
)
async def register_replica(
    body: ReplicaIn, service: ServiceDep, _: Admin, response: Response
) -> ReplicaOut:
    state = ReplicaState(
        id=body.id,
        address=body.address,
        model=body.model,
        accelerator=body.accelerator,
        tp=body.tp,
        kv_capacity_tokens=body.kv_capacity_tokens,
        labels=dict(body.labels),
    )
    if not service.register_replica(state, metrics_url=body.metrics_url):
        response.status_code = 200
    return _out(service, body.id)


@router.delete(
    "/{replica_id}",
    status_code=204,
    responses=problems(*AUTH, 422, described={404: "no such replica"}),
    summary="Deregister a replica",
)
async def deregister_replica(
    service: ServiceDep, _: Admin, replica_id: str = ReplicaId
) -> Response:
    if replica_id not in service.replicas:
        raise HTTPException(404, f"no replica '{replica_id}'")
    service.deregister_replica(replica_id)
    return Response(status_code=204)
