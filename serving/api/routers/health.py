"""Liveness and readiness. Ready only with a plan, or in the explicit no-plan fallback mode."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from placement.plan.capacity_source import ROOFLINE_SOURCE, describe, parse_model_source
from serving.api.deps import RuntimeDep, ServiceDep
from serving.api.runtime import ServiceRuntime
from serving.api.schemas import Health

router = APIRouter(tags=["health"])


@router.get(
    "/healthz",
    response_model=Health,
    summary="The process is up (status `degraded` while the shared state is unreachable and "
    "it routes on local state)",
)
async def healthz(runtime: RuntimeDep) -> Health:
    capacity = capacity_statement(runtime)
    if runtime.shared is None:
        return Health(status="ok", capacity=capacity)
    ok, detail = runtime.shared.health()
    return Health(status="ok" if ok else "degraded", detail=detail, capacity=capacity)


def capacity_statement(runtime: ServiceRuntime) -> str:
    """Where the installed plan's capacities come from, said plainly."""
    plan = runtime.service.plan
    champion = runtime.champion.champion if runtime.champion is not None else None
    if plan is None:
        return "no plan yet"
    source = parse_model_source(plan.capacity_source)
    if source is not None:
        said = f"plan {plan.version}: capacities from {plan.capacity_source}"
        if source.version is not None and champion not in (None, str(source.version)):
            said += f"; champion is now version {champion}, re-solving with it"
        return said
    if plan.capacity_source == ROOFLINE_SOURCE:
        said = f"plan {plan.version}: capacities from {describe(plan.capacity_source)}"
        if champion is not None:
            return said + f"; champion version {champion} is promoted, re-solving with it"
        return said + (
            ": no champion in the model registry (`placement retrain --telemetry DIR` trains "
            "and promotes one; PLACEMENT_RETRAIN_EVERY_HOURS does it on a schedule)"
        )
    return f"plan {plan.version}: capacities from {plan.capacity_source}"


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
