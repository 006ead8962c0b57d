"""Plans: the installed one, any stored version, and a solve on demand."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, HTTPException, Path

from serving.api.deps import Admin, PlanReader, RuntimeDep
from serving.api.schemas import Problem, SolveOut

router = APIRouter(prefix="/v1", tags=["plans"])
AUTH: dict[int | str, dict[str, Any]] = {401: {"model": Problem}, 403: {"model": Problem}}


@router.get(
    "/plan",
    responses={**AUTH, 404: {"model": Problem, "description": "no plan installed"}},
    summary="The installed plan (placement.plan/v1 JSON)",
)
async def current_plan(runtime: RuntimeDep, _: PlanReader) -> dict[str, Any]:
    plan = runtime.service.plan
    if plan is None:
        raise HTTPException(404, "no plan installed")
    return plan.to_dict()


@router.get(
    "/plans/{version}",
    responses={**AUTH, 404: {"model": Problem, "description": "no such version"}},
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
    responses={**AUTH, 409: {"model": Problem, "description": "no planner configured"}},
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
