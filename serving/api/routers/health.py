"""Liveness and readiness. Ready only with a plan, or in the explicit no-plan fallback mode."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from serving.api.deps import RuntimeDep, ServiceDep
from serving.api.schemas import Health
from serving.champion_watch import capacity_statement

router = APIRouter(tags=["health"])


@router.get(
    "/healthz",
    response_model=Health,
    summary="The process is up (status `degraded` while the shared state is unreachable and "
    "it routes on local state)",
)
async def healthz(runtime: RuntimeDep) -> Health:
    champion = runtime.champion.champion if runtime.champion is not None else None
    capacity = capacity_statement(runtime.service.plan, champion)
    if runtime.shared is None:
        return Health(status="ok", capacity=capacity)
    ok, detail = runtime.shared.health()
    return Health(status="ok" if ok else "degraded", detail=detail, capacity=capacity)


@router.get(
    "/readyz",
    response_model=Health,
    responses={503: {"model": Health, "description": "not ready: no plan yet"}},
    summary="Ready to route",
)
async def readyz(service: ServiceDep) -> JSONResponse:
    ready, detail = service.readiness()
    body = Health(status="ready" if ready else "not ready", detail=detail)
    return JSONResponse(body.model_dump(), status_code=200 if ready else 503)
