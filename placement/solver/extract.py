"""Extraction: a solution's shares → the published :class:`~placement.plan.schema.Plan`.

* **Groups** (tenant, model, key): the classes' served rates on each replica, as route weights; the
  replicas asked to keep the prefix warm; groups that are wholly shed are left out (their
  traffic meets the tenant's default).
* **Defaults** (tenant, model): the default units' routes; when a tenant has no default
  traffic served, its groups' routes merged, else its pool's replicas with the most headroom.
* **Secondary** replicas of each route: the two of its pool with the most headroom.
* **Replicas**: planned req/s and the load cap — the capacity at SLO for the mix the plan
  sends there (planned / utilisation; the pool's mix when idle).
* **Predicted attainment** per tenant and class: of the traffic the plan admits, the share
  predicted to meet its SLO on the replicas it is sent to, from each replica's planned mix
  with queueing (:mod:`placement.solver.attainment`; ``attainment="pooled"``: each pool's
  wait as one multi-server queue, :mod:`placement.solver.pooled_attainment`); shed traffic is
  reported as shed, not counted as missed.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from placement.plan.schema import (
    ClassOutcome,
    DefaultRoute,
    Plan,
    PrefixGroupRoute,
    ReplicaPlan,
    Route,
    SolverReport,
    TenantPlan,
    TimingSourceEntry,
)
from placement.solver.attainment import predicted_meet
from placement.solver.instance import FloatArray, Instance
from placement.solver.pooled_attainment import pooled_meet
from placement.solver.solution import PoolSolution, Solution

SECONDARY_REPLICAS = 2
#: the models of the reported predicted attainment, by name (``SolveOptions.attainment``)
ATTAINMENT_MODELS = {"replica": predicted_meet, "pooled": pooled_meet}


def _route(weights: dict[int, float], inst: Instance, spare_order: list[int]) -> Route | None:
    total = sum(weights.values())
    if total <= 0:
        return None
    items = sorted(((r, w / total) for r, w in weights.items() if w > 0), key=lambda rw: -rw[1])
    # rounding: renormalise so the weights sum to 1 exactly enough for the schema
    s = sum(w for _, w in items)
    reps = tuple(inst.replica_ids[r] for r, _ in items)
    ws = tuple(w / s for _, w in items)
    secondary = tuple(inst.replica_ids[r] for r in spare_order if inst.replica_ids[r] not in reps)[
        :SECONDARY_REPLICAS
    ]
    return Route(replicas=reps, weights=ws, secondary=secondary)


def _classes_served(inst: Instance, r: int) -> tuple[str, ...]:
    """The request classes replica ``r`` serves when the plan keeps it apart from some
    (:mod:`placement.solver.chunk_split`); empty when it serves every class."""
    if inst.replica_classes.size == 0 or inst.replica_classes[r].all():
        return ()
    return tuple(c for c, ok in zip(inst.classes, inst.replica_classes[r], strict=True) if ok)


def _churn(inst: Instance, pools: tuple[PoolSolution, ...]) -> float:
    """Share of traffic (of units the previous plan routed) that the new plan moves."""
    moved = 0.0
    routed = 0.0
    for p in pools:
        if not (p.prev > 0).any():
            continue
        served = np.bincount(p.pair_unit, p.x, inst.n_units)
        new = np.where(served[p.pair_unit] > 0, p.x / np.maximum(served[p.pair_unit], 1e-12), 0)
        had = np.bincount(p.pair_unit, p.prev, inst.n_units) > 0
        diff = np.bincount(p.pair_unit, np.abs(new - p.prev), inst.n_units)
        # a unit the new plan sheds entirely moved all of its traffic
        diff = np.where(served > 0, diff / 2.0, 1.0)
        moved += float((inst.unit_rate * diff)[had].sum())
        routed += float(inst.unit_rate[had].sum())
    return moved / routed if routed > 0 else 0.0


def extract_plan(
    inst: Instance,
    solution: Solution,
    *,
    version: int,
    previous: Plan | None,
    time_limit_s: float,
    created_at: float,
    attainment: str = "replica",
) -> Plan:
    n_r = inst.n_replicas
    util = np.zeros(n_r)
    planned = np.zeros(n_r)
    warm_tokens = np.zeros(n_r)
    served = np.zeros(inst.n_units)
    floors = np.zeros(len(inst.tenants))
    caps = np.zeros(len(inst.tenants))
    for p in solution.pools:
        rate = inst.unit_rate[p.pair_unit] * p.x
        util += np.bincount(p.pair_replica, p.util, n_r)
        planned += np.bincount(p.pair_replica, rate, n_r)
        served += np.bincount(p.pair_unit, p.x, inst.n_units)
        warm_prefix = np.where(
            p.warm & (inst.unit_key[p.pair_unit] >= 0), inst.unit_prefix[p.pair_unit], 0
        )
        warm_tokens += np.bincount(p.pair_replica, warm_prefix, n_r)
        floors += p.floor
        caps += p.cap
    spare: dict[int, list[int]] = {}
    for m in range(len(inst.models)):
        pool = np.flatnonzero((inst.replica_model == m) & inst.replica_healthy)
        spare[m] = pool[np.argsort(util[pool], kind="stable")].tolist()

    # groups by (tenant, model, key): one prefix may be sent to two models' pools
    group_w: dict[tuple[int, int, int], dict[int, float]] = defaultdict(lambda: defaultdict(float))
    group_warm: dict[tuple[int, int, int], set[int]] = defaultdict(set)
    default_w: dict[tuple[int, int], dict[int, float]] = defaultdict(lambda: defaultdict(float))
    tenant_any_w: dict[tuple[int, int], dict[int, float]] = defaultdict(lambda: defaultdict(float))
    for p in solution.pools:
        on = np.flatnonzero(p.x > 0)
        for i in on.tolist():
            d, r = int(p.pair_unit[i]), int(p.pair_replica[i])
            t, m, key = int(inst.unit_tenant[d]), int(inst.unit_model[d]), int(inst.unit_key[d])
            w = float(inst.unit_rate[d] * p.x[i])
            tenant_any_w[(t, m)][r] += w
            if key >= 0:
                group_w[(t, m, key)][r] += w
                if p.warm[i]:
                    group_warm[(t, m, key)].add(r)
            else:
                default_w[(t, m)][r] += w

    groups = []
    group_units: dict[tuple[int, int, int], list[int]] = defaultdict(list)
    for d in np.flatnonzero(inst.unit_key >= 0).tolist():
        unit = (int(inst.unit_tenant[d]), int(inst.unit_model[d]), int(inst.unit_key[d]))
        group_units[unit].append(d)
    for (t, m, key), ds in sorted(group_units.items()):
        route = _route(group_w.get((t, m, key), {}), inst, spare.get(m, []))
        if route is None:
            continue
        groups.append(
            PrefixGroupRoute(
                key=key,
                depth_blocks=int(inst.unit_depth[ds[0]]),
                tenant=inst.tenants[t],
                model=inst.models[m],
                rate_rps=float(inst.unit_rate[ds].sum()),
                prefix_tokens=int(inst.unit_prefix[ds[0]]),
                route=route,
                warm=tuple(inst.replica_ids[r] for r in sorted(group_warm[(t, m, key)])),
            )
        )

    defaults = []
    demanded = sorted(
        {(int(t), int(m)) for t, m in zip(inst.unit_tenant, inst.unit_model, strict=True)}
    )
    for t, m in demanded:
        if not spare.get(m):
            continue  # no healthy replica serves the model: nothing to route to
        route = _route(default_w.get((t, m), {}), inst, spare[m]) or _route(
            tenant_any_w.get((t, m), {}), inst, spare[m]
        )
        if route is None:
            head = spare[m][: 1 + SECONDARY_REPLICAS]
            route = _route({r: 1.0 for r in head}, inst, spare[m])
        assert route is not None
        defaults.append(DefaultRoute(tenant=inst.tenants[t], model=inst.models[m], route=route))

    replicas = []
    pool_mix = _pool_mix_capacity(inst)
    for r in np.flatnonzero(inst.replica_healthy).tolist():
        cap = planned[r] / util[r] if util[r] > 1e-12 else pool_mix[r]
        replicas.append(
            ReplicaPlan(
                id=inst.replica_ids[r],
                kind=inst.replica_group[r],
                accelerator=inst.kind_accelerator[inst.replica_kind[r]],
                model=inst.models[inst.replica_model[r]],
                load_cap_rps=float(max(cap, planned[r])),
                planned_rps=float(planned[r]),
                kv_budget_tokens=int(inst.replica_kv_budget[r]),
                warm_prefix_tokens=int(warm_tokens[r]),
                classes=_classes_served(inst, r),
            )
        )

    attain = np.zeros(inst.n_units)
    pools = solution.pools
    meets = ATTAINMENT_MODELS[attainment](
        inst,
        [p.pair_unit for p in pools],
        [p.pair_replica for p in pools],
        [inst.unit_rate[p.pair_unit] * p.x for p in pools],
        [p.warm for p in pools],
    )
    for p, ok in zip(pools, meets, strict=True):
        attain += np.bincount(p.pair_unit, p.x * ok, inst.n_units)
    tenants = []
    outcomes = []
    n_t = len(inst.tenants)
    demand_t = np.bincount(inst.unit_tenant, inst.unit_rate, n_t)
    served_t = np.bincount(inst.unit_tenant, inst.unit_rate * served, n_t)
    attained_t = np.bincount(inst.unit_tenant, inst.unit_rate * attain, n_t)
    for t in range(n_t):
        declared = inst.tenants[t] in inst.declared_tenants
        if demand_t[t] <= 0 and inst.credit_share[t] <= 0 and not declared:
            continue
        tenants.append(
            TenantPlan(
                tenant=inst.tenants[t],
                demand_rps=float(demand_t[t]),
                admitted_rps=float(served_t[t]),
                guaranteed_share=float(np.clip(inst.credit_share[t], 0, 1)),
                cap_share=float(np.clip(inst.burst_cap[t], 0, 1)),
                guaranteed_rps=float(floors[t]),
                cap_rps=float(caps[t]),
                predicted_attainment=float(np.clip(attained_t[t] / served_t[t], 0, 1))
                if served_t[t] > 0
                else None,
            )
        )
        for c in range(len(inst.classes)):
            sel = (inst.unit_tenant == t) & (inst.unit_class == c)
            demand = float(inst.unit_rate[sel].sum())
            if demand <= 0:
                continue
            srv = float((inst.unit_rate * served)[sel].sum())
            outcomes.append(
                ClassOutcome(
                    tenant=inst.tenants[t],
                    request_class=inst.classes[c],
                    demand_rps=demand,
                    served_rps=srv,
                    shed_share=float(np.clip(1.0 - srv / demand, 0, 1)),
                    # of the admitted traffic; wholly shed: nothing admitted misses
                    predicted_attainment=float(
                        np.clip((inst.unit_rate * attain)[sel].sum() / srv, 0, 1) if srv > 0 else 1
                    ),
                )
            )

    report = SolverReport(
        backend=solution.backend,
        status=solution.status,
        objective=solution.objective,
        bound=solution.bound,
        gap=solution.gap,
        solve_s=solution.solve_s,
        time_limit_s=time_limit_s,
        churn=_churn(inst, solution.pools) if previous is not None else 0.0,
        detail=solution.detail,
    )
    return Plan(
        version=version,
        created_at=created_at,
        previous_version=previous.version if previous is not None else None,
        fleet=inst.fleet,
        inputs_digest=inst.digest(),
        capacity_source=inst.capacity_source,
        solver=report,
        replicas=tuple(replicas),
        groups=tuple(groups),
        defaults=tuple(defaults),
        tenants=tuple(tenants),
        outcomes=tuple(outcomes),
        timing_sources=timing_sources(inst),
    )


def timing_sources(inst: Instance) -> tuple[TimingSourceEntry, ...]:
    """Where each replica kind's engine timings come from (see :mod:`sim.costmodel.sources`);
    kinds outside the catalogue (synthetic instances) are left out."""
    from placement.domain.accelerators import get_accelerator
    from placement.domain.llm import get_model
    from placement.errors import InputError
    from sim.costmodel.sources import replica_sources

    names = {
        (inst.kind_accelerator[k], inst.models[int(inst.replica_model[r])], int(inst.kind_tp[k]))
        for r, k in enumerate(inst.replica_kind.tolist())
    }
    kinds = []
    for accelerator, model, tp in sorted(names):
        try:
            kinds.append((get_accelerator(accelerator), get_model(model), tp))
        except InputError:
            continue
    found = replica_sources(kinds)
    return tuple(
        TimingSourceEntry(
            accelerator=src.accelerator,
            model=model,
            tp=tp,
            source=src.source,
            expected_error=src.expected_error,
            detail=src.detail,
        )
        for model, tp, src in found
    )


def _pool_mix_capacity(inst: Instance) -> FloatArray:
    """Per replica, its capacity at SLO for its pool's whole demand mix (harmonic blend)."""
    out = np.zeros(inst.n_replicas)
    for k in range(len(inst.kind_accelerator)):
        reps = np.flatnonzero(inst.replica_kind == k)
        d = inst.unit_model == inst.replica_model[reps[0]]
        cap = inst.capacity[d, k]
        rate = inst.unit_rate[d]
        ok = cap > 0
        if ok.any() and rate[ok].sum() > 0:
            out[reps] = rate[ok].sum() / (rate[ok] / cap[ok]).sum()
    return out
