"""Plans: the installed one, any stored version, and a solve on demand."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, HTTPException, Path

from serving.api.deps import Admin, PlanReader, RuntimeDep
from serving.api.responses import AUTH, problems
from serving.api.schemas import SolveOut

router = APIRouter(prefix="/v1", tags=["plans"])


@router.get(
    "/plan",
    responses=problems(*AUTH, described={404: "no plan installed"}),
    summary="The installed plan (placement.plan/v1 JSON)",
)
async def current_plan(runtime: RuntimeDep, _: PlanReader) -> dict[str, Any]:
    plan = runtime.service.plan
    if plan is None:
        raise HTTPException(404, "no plan installed")
    return plan.to_dict()


@router.get(
    "/plans/{version}",
    responses=problems(*AUTH, 422, described={404: "no such version"}),
    summary="A stored plan version",
)
async def plan_version(
    runtime: RuntimeDep, _: PlanReader, version: int = Path(ge=1, le=1 << 62)
) -> dict[str, Any]:
    plan = runtime.service.plan
    if plan is None or plan.version != version:
        store = runtime.planner.store if runtime.planner is not None else None
        plan = store.get(version) if store is not None else None
    if plan is None:
        raise HTTPException(404, f"no plan version {version}")
    return plan.to_dict()


@router.post(
    "/plan:solve",
    response_model=SolveOut,
    responses=problems(*AUTH, described={409: "no planner configured"}),
    summary="Re-solve now (in a worker process); installs the plan only if it is good",
)
async def solve_now(runtime: RuntimeDep, _: Admin) -> SolveOut:
    if runtime.planner is None:
        raise HTTPException(409, "no planner configured in this process (no fleet or solver)")
    result = await runtime.planner.solve_once("requested")
    return SolveOut(
        outcome=result.outcome,
        reason=result.reason,
        detail=result.detail,
        version=result.version,
        solve_s=result.solve_s,
    )
