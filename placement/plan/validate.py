"""Semantic checks of a plan before it is published: capacity, coverage, credits.

* **capacity** — every replica's planned req/s ≤ its load cap (within a relative tolerance);
* **coverage** — every group and default routes (primary and secondary) only to replicas the
  plan lists, healthy and serving the route's model (and, given a fleet, replicas that exist);
  every (tenant, model) a group names, and every tenant with demand, has a default;
* **credits** — each tenant's admitted rate is at least its floor (``guaranteed_rps``: the
  solver's ``min(non-sheddable demand, guarantee)``) and at most its cap (``cap_rps``), and
  never above its demand.

:func:`problems` lists every violation in words; :func:`validate` raises
:class:`PlanRejected` with them.
"""

from __future__ import annotations

from collections.abc import Iterable

from placement.domain.fleet import Fleet
from placement.errors import PlanRejected
from placement.plan.schema import Plan, Route

CAPACITY_TOLERANCE = 1e-3  # relative
RATE_TOLERANCE_RPS = 1e-3


def _route_problems(
    where: str, route: Route, model: str, replica_model: dict[str, str], existing: set[str] | None
) -> list[str]:
    out = []
    for rid in route.replicas + route.secondary:
        if existing is not None and rid not in existing:
            out.append(f"coverage: {where} routes to {rid}, which the fleet does not have")
        elif rid not in replica_model:
            out.append(
                f"coverage: {where} routes to {rid}, which is not a healthy replica of the plan"
            )
        elif replica_model[rid] != model:
            out.append(
                f"coverage: {where} routes {model} traffic to {rid}, "
                f"which serves {replica_model[rid]}"
            )
    return out


def problems(
    plan: Plan,
    *,
    fleet: Fleet | None = None,
    unhealthy: Iterable[str] = (),
    replica_ids: Iterable[str] | None = None,
) -> list[str]:
    """Every capacity, coverage and credit violation of ``plan`` (empty: valid). The replicas
    that exist are ``fleet``'s, else ``replica_ids`` (a service's registered replicas), else
    not checked."""
    out: list[str] = []
    dead = set(unhealthy)
    replica_model = {r.id: r.model for r in plan.replicas if r.id not in dead}
    existing = (
        {r.id for r in fleet.replicas}
        if fleet is not None
        else (set(replica_ids) if replica_ids is not None else None)
    )
    for r in plan.replicas:
        if r.planned_rps > r.load_cap_rps * (1 + CAPACITY_TOLERANCE) + 1e-9:
            out.append(
                f"capacity: {r.id} is planned {r.planned_rps:.3f} req/s over its cap "
                f"{r.load_cap_rps:.3f} req/s"
            )
        if existing is not None and r.id not in existing:
            out.append(f"coverage: replica {r.id} is not in the fleet")
    for g in plan.groups:
        out += _route_problems(
            f"group {g.key} of tenant '{g.tenant}'", g.route, g.model, replica_model, existing
        )
    defaults = {(d.tenant, d.model) for d in plan.defaults}
    for d in plan.defaults:
        out += _route_problems(
            f"default of tenant '{d.tenant}' for {d.model}",
            d.route,
            d.model,
            replica_model,
            existing,
        )
    served_models = set(replica_model.values())
    needed = {(g.tenant, g.model) for g in plan.groups}
    for tenant, model in sorted(needed - defaults):
        out.append(f"coverage: tenant '{tenant}' has groups on {model} but no default route")
    tenants_with_default = {tenant for tenant, model in defaults if model in served_models}
    for t in plan.tenants:
        if t.demand_rps > 0 and t.tenant not in tenants_with_default and served_models:
            out.append(f"coverage: tenant '{t.tenant}' has demand but no default route")
        if t.guaranteed_rps is not None and t.admitted_rps < t.guaranteed_rps - RATE_TOLERANCE_RPS:
            out.append(
                f"credits: tenant '{t.tenant}' is admitted {t.admitted_rps:.3f} req/s, below its "
                f"guaranteed {t.guaranteed_rps:.3f} req/s"
            )
        if t.cap_rps is not None and t.admitted_rps > t.cap_rps + RATE_TOLERANCE_RPS:
            out.append(
                f"credits: tenant '{t.tenant}' is admitted {t.admitted_rps:.3f} req/s, above its "
                f"cap {t.cap_rps:.3f} req/s"
            )
        if t.admitted_rps > t.demand_rps + RATE_TOLERANCE_RPS:
            out.append(
                f"credits: tenant '{t.tenant}' is admitted {t.admitted_rps:.3f} req/s, more than "
                f"its demand {t.demand_rps:.3f} req/s"
            )
    return out


def validate(
    plan: Plan,
    *,
    fleet: Fleet | None = None,
    unhealthy: Iterable[str] = (),
    replica_ids: Iterable[str] | None = None,
) -> Plan:
    """``plan`` itself if valid; else :class:`PlanRejected` listing every problem."""
    found = problems(plan, fleet=fleet, unhealthy=unhealthy, replica_ids=replica_ids)
    if found:
        raise PlanRejected(
            f"plan {plan.version} rejected ({len(found)} problem{'s' if len(found) > 1 else ''}): "
            + "; ".join(found)
        )
    return plan
