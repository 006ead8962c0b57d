"""``POST /v1/whatif`` in a running service: the current fleet with some replica kinds'
counts changed, the planner's current demand window with some tenants' demand scaled, every
SLO scaled — solved into a hypothetical plan (never installed) and summarised.

Runs as a job off the request path (:mod:`serving.jobs`), in a thread: the solve is the same
the planner runs, with the declared tenants' credits.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from placement.domain.fleet import fleet_from_dict
from placement.domain.requests import DEFAULT_CLASSES, Request, Tenant
from placement.errors import InfeasiblePlan, InputError
from placement.plan import Plan
from serving.demand import decode_demand, encode_demand
from serving.service import PlacementService


def whatif_context(fleet_file: Path, service: PlacementService) -> Callable[[], dict[str, Any]]:
    """What a what-if job needs of this service, taken on the event loop when the job is
    submitted (a copy: the job runs in the planner's worker process): the fleet document, the
    demand window (encoded) and the declared tenants."""
    doc = yaml.safe_load(fleet_file.read_text(encoding="utf-8"))

    def context() -> dict[str, Any]:
        window = service.demand
        return {
            "fleet": copy.deepcopy(doc),
            "demand": encode_demand(window.snapshot()) if window is not None else [],
            "tenants": {name: dataclasses.asdict(t) for name, t in service.tenants.items()},
        }

    return context


def solve_whatif(payload: dict[str, Any]) -> dict[str, Any]:
    """Solve one what-if (module level: pickled into the worker) from the request body and
    the ``context`` :func:`whatif_context` added to it."""
    from placement.solver.instance import build_instance
    from placement.solver.solve import solve_plan

    context = payload["context"]
    fleet = fleet_from_dict(_with_counts(context["fleet"], payload.get("replicas", {})))
    requests = _scaled(decode_demand(context["demand"]), payload.get("demand_scale", {}))
    tenants = {name: Tenant(**t) for name, t in context["tenants"].items()}
    slo_scale = float(payload.get("slo_scale", 1.0))
    classes = {
        name: dataclasses.replace(
            c, ttft_slo_s=c.ttft_slo_s * slo_scale, tpot_slo_s=c.tpot_slo_s * slo_scale
        )
        for name, c in DEFAULT_CLASSES.items()
    }
    result: dict[str, Any] = {
        "replicas": len(fleet.replicas),
        "cost_per_hour": fleet.cost_per_hour,
        "demand_requests": len(requests),
    }
    if not requests:
        return {**result, "status": "no_demand", "explanation": ["no demand in the window yet"]}
    instance = build_instance(fleet, requests, tenants, classes, shed_unreachable=True)
    try:
        plan = solve_plan(instance, time_limit_s=float(payload.get("time_limit_s", 10.0)))
    except InfeasiblePlan as exc:
        return {**result, "status": "infeasible", "explanation": exc.explanation}
    return {**result, **_summary(plan)}


def _with_counts(doc: Mapping[str, Any], counts: Mapping[str, int]) -> dict[str, Any]:
    out = copy.deepcopy(dict(doc))
    kinds = {g.get("kind") for g in out.get("replicas", [])}
    unknown = sorted(set(counts) - kinds)
    if unknown:
        raise InputError(
            f"no replica kind {', '.join(unknown)} in the fleet",
            field="replicas",
            expected="one of " + ", ".join(sorted(str(k) for k in kinds)),
        )
    for group in out["replicas"]:
        if group["kind"] in counts:
            group["count"] = int(counts[group["kind"]])
    out["replicas"] = [g for g in out["replicas"] if g.get("count", 1) > 0]
    if not out["replicas"]:
        raise InputError("no replica left", field="replicas", expected="at least one replica")
    return out


def _scaled(requests: Sequence[Request], scale: Mapping[str, float]) -> list[Request]:
    """Each request of a scaled tenant ``floor(s)`` times, plus once more for a share
    ``s - floor(s)`` of them chosen by id (the same each time)."""
    out: list[Request] = []
    for r in requests:
        s = float(scale.get(r.tenant, 1.0))
        copies = math.floor(s)
        digest = hashlib.blake2b(str(r.id).encode(), digest_size=8).digest()
        if int.from_bytes(digest, "big") / 2.0**64 < s - copies:
            copies += 1
        out.extend([r] * copies)
    return out


def _summary(plan: Plan) -> dict[str, Any]:
    outs = plan.outcomes
    demand = sum(o.demand_rps for o in outs)
    return {
        "status": plan.solver.status,
        "solve_s": plan.solver.solve_s,
        "capacity_source": plan.capacity_source,
        "predicted_attainment": (
            sum(o.demand_rps * o.predicted_attainment for o in outs) / demand if demand else 1.0
        ),
        "shed_share": sum(o.demand_rps * o.shed_share for o in outs) / demand if demand else 0.0,
        "tenants": [t.model_dump(mode="json") for t in plan.tenants],
    }
