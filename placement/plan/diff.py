"""Comparing two plans: how much traffic moved (churn), which groups were added, removed or
moved, which replicas' caps changed, and how predicted attainment changed."""

from __future__ import annotations

from dataclasses import dataclass, field

from placement.plan.schema import Plan, Route

CAP_CHANGE_RELATIVE = 0.01
ATTAINMENT_CHANGE = 0.005


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanDiff:
    old_version: int
    new_version: int
    moved_share: float  # churn: share of routed traffic (by rate) sent elsewhere
    groups_added: list[int] = field(default_factory=list)
    groups_removed: list[int] = field(default_factory=list)
    groups_moved: list[tuple[int, float]] = field(default_factory=list)  # key, moved share
    caps_changed: list[tuple[str, float, float]] = field(default_factory=list)
    attainment_changed: list[tuple[str, str, float, float]] = field(default_factory=list)


def route_moved_share(a: Route, b: Route) -> float:
    """Half the L1 distance between two routes' weights: the share of traffic that moves."""
    wa = dict(zip(a.replicas, a.weights, strict=True))
    wb = dict(zip(b.replicas, b.weights, strict=True))
    return 0.5 * sum(abs(wa.get(r, 0.0) - wb.get(r, 0.0)) for r in set(wa) | set(wb))


def diff_plans(old: Plan, new: Plan) -> PlanDiff:
    old_groups = {(g.tenant, g.key): g for g in old.groups}
    new_groups = {(g.tenant, g.key): g for g in new.groups}
    moved_rate = 0.0
    total_rate = 0.0
    groups_moved = []
    for k in sorted(set(old_groups) & set(new_groups)):
        share = route_moved_share(old_groups[k].route, new_groups[k].route)
        rate = new_groups[k].rate_rps
        moved_rate += share * rate
        total_rate += rate
        if share > 1e-6:
            groups_moved.append((k[1], share))
    # defaults weigh by the tenant's demand not covered by groups
    demand = {t.tenant: t.demand_rps for t in new.tenants}
    grouped: dict[str, float] = {}
    for g in new.groups:
        grouped[g.tenant] = grouped.get(g.tenant, 0.0) + g.rate_rps
    old_defaults = {(d.tenant, d.model): d.route for d in old.defaults}
    for d in new.defaults:
        before = old_defaults.get((d.tenant, d.model))
        if before is None:
            continue
        rate = max(demand.get(d.tenant, 0.0) - grouped.get(d.tenant, 0.0), 0.0)
        moved_rate += route_moved_share(before, d.route) * rate
        total_rate += rate
    old_caps = {r.id: r.load_cap_rps for r in old.replicas}
    caps_changed = [
        (r.id, old_caps[r.id], r.load_cap_rps)
        for r in new.replicas
        if r.id in old_caps
        and abs(r.load_cap_rps - old_caps[r.id]) > CAP_CHANGE_RELATIVE * max(old_caps[r.id], 1e-9)
    ]
    old_att = {(o.tenant, o.request_class): o.predicted_attainment for o in old.outcomes}
    attainment = [
        (o.tenant, o.request_class, old_att[(o.tenant, o.request_class)], o.predicted_attainment)
        for o in new.outcomes
        if (o.tenant, o.request_class) in old_att
        and abs(o.predicted_attainment - old_att[(o.tenant, o.request_class)]) > ATTAINMENT_CHANGE
    ]
    return PlanDiff(
        old_version=old.version,
        new_version=new.version,
        moved_share=moved_rate / total_rate if total_rate > 0 else 0.0,
        groups_added=[k[1] for k in sorted(set(new_groups) - set(old_groups))],
        groups_removed=[k[1] for k in sorted(set(old_groups) - set(new_groups))],
        groups_moved=groups_moved,
        caps_changed=caps_changed,
        attainment_changed=attainment,
    )
