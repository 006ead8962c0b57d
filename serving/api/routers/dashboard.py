"""The operators' dashboard: ``GET /dashboard`` (a page) and ``GET /v1/dashboard`` (its data).

The page (``serving/api/dashboard.html``, no framework, nothing fetched from elsewhere) reads
the data with the key given after ``#key=`` in its address (or typed in) and redraws every few
seconds: fleet and health, the current plan, tenants against their credits, SLO attainment
over time and recent refusals. The data spans every tenant: a fleet-wide ``admin`` or
``metrics`` key reads it.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import asdict
from importlib import resources
from typing import Annotated, Any

from fastapi import APIRouter, Depends
from fastapi.responses import HTMLResponse

from serving.api.deps import RuntimeDep, requires_fleet_wide
from serving.api.responses import AUTH, problems
from serving.api.security import Principal

router = APIRouter(tags=["dashboard"])

DashboardReader = Annotated[Principal, Depends(requires_fleet_wide("admin", "metrics"))]
MAX_REPLICAS_SHOWN = 200
PAGE = resources.files("serving.api").joinpath("dashboard.html")


@router.get("/dashboard", response_class=HTMLResponse, include_in_schema=False)
async def dashboard_page() -> HTMLResponse:
    return HTMLResponse(PAGE.read_text(encoding="utf-8"))


@router.get(
    "/v1/dashboard", responses=problems(*AUTH), summary="Fleet, plan, tenants, SLO, refusals"
)
async def dashboard_data(runtime: RuntimeDep, _: DashboardReader) -> dict[str, Any]:
    service = runtime.service
    now = time.time()
    replicas = list(service.replicas.values())
    plan = service.plan
    plan_out: dict[str, Any] | None = None
    if plan is not None:
        plan_out = {
            "version": plan.version,
            "age_s": max(0.0, now - plan.created_at),
            "fleet": plan.fleet,
            "solver_status": plan.solver.status,
            "solver_backend": plan.solver.backend,
            "solve_s": plan.solver.solve_s,
            "capacity_source": plan.capacity_source,
            "replicas": len(plan.replicas),
            "groups": len(plan.groups),
            "defaults": len(plan.defaults),
            "tenants": [t.model_dump() for t in plan.tenants],
        }
    return {
        "generated_at": now,
        "health": {
            "ready": plan is not None or service.no_plan_fallback,
            "replicas": len(replicas),
            "healthy": sum(r.healthy for r in replicas),
            "in_flight": service.admission.in_flight,
            "models": dict(Counter(r.model for r in replicas)),
        },
        "replicas": [
            {
                "id": r.id,
                "model": r.model,
                "accelerator": r.accelerator,
                "healthy": r.healthy,
                "in_flight": r.in_flight,
                "kv_cache_usage_perc": r.kv_cache_usage_perc,
            }
            for r in replicas[:MAX_REPLICAS_SHOWN]
        ],
        "plan": plan_out,
        "tenants": [asdict(u) for u in service.tenant_usage()],
        "slo_history": service.activity.history(),
        "refusals": service.activity.recent_refusals(),
    }
