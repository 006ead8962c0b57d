"""Explaining an infeasible instance in operator terms, never relaxing it silently.

Three causes are told apart:

* **no replica serves a model** a tenant is guaranteed capacity on;
* **an SLO that cannot hold** for some non-sheddable demand on any replica kind of its pool
  (capacity at SLO is zero even at no load: prompts too long for the TTFT objective, say);
* **guaranteed credits that do not fit**: the capacity-deficit program (the pool's model with
  each tenant floor made elastic, ``served + deficit ≥ floor``, minimising ``Σ deficit``)
  says which tenants fall short and by how many req/s. The fix is then *measured*: replicas of
  the kind with the most capacity per dollar for the short tenants' mix are added to a what-if
  instance until the deficit program finds no deficit (floors grow with the pool, so this is
  not simply the deficit divided by a replica's capacity).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from placement.solver.candidates import select_candidates
from placement.solver.chunk_split import split_classes
from placement.solver.instance import Instance
from placement.solver.lp import solve
from placement.solver.model import build_pool_model

DEFICIT_TOLERANCE_RPS = 1e-3
MAX_FIX_ROUNDS = 6


def _pool_deficits(inst: Instance, model: int, top_k: int) -> dict[int, float]:
    cands = select_candidates(inst, top_k=top_k)
    mask = inst.unit_model[cands.unit] == model
    pool = dataclasses.replace(cands, unit=cands.unit[mask], replica=cands.replica[mask])
    pm = build_pool_model(inst, model, pool, elastic_floors=True)
    res = solve(pm.lp, backend="mathopt-highs", time_limit_s=30.0)
    if res.status not in ("optimal", "feasible"):
        # the elastic program is always feasible; anything else is a solver failure
        return {int(t): float(pm.floor[t]) for t in pm.floor_tenants}
    deficits = res.x[pm.lp.n_vars - len(pm.floor_tenants) :]
    return {
        int(t): float(v)
        for t, v in zip(pm.floor_tenants, deficits, strict=True)
        if v > DEFICIT_TOLERANCE_RPS
    }


def with_extra_replicas(inst: Instance, kind: int, count: int) -> Instance:
    """The instance with ``count`` more healthy replicas of ``kind`` (a what-if; the classes
    each replica serves split again over the larger pool)."""
    model = int(inst.replica_model[inst.replica_kind == kind][0])
    budget = float(inst.replica_kv_budget[inst.replica_kind == kind][0])
    group = inst.replica_group[int(np.flatnonzero(inst.replica_kind == kind)[0])]
    grown = dataclasses.replace(
        inst,
        replica_ids=inst.replica_ids + tuple(f"what-if-{i}" for i in range(count)),
        replica_kind=np.concatenate([inst.replica_kind, np.full(count, kind)]),
        replica_model=np.concatenate([inst.replica_model, np.full(count, model)]),
        replica_cost=np.concatenate([inst.replica_cost, np.full(count, inst.kind_cost[kind])]),
        replica_kv_budget=np.concatenate([inst.replica_kv_budget, np.full(count, budget)]),
        replica_healthy=np.concatenate([inst.replica_healthy, np.ones(count, dtype=bool)]),
        replica_group=inst.replica_group + (group,) * count,
        replica_classes=np.zeros((0, 0), dtype=np.bool_),
    )
    if inst.replica_classes.size == 0:
        return grown
    return dataclasses.replace(grown, replica_classes=split_classes(grown))


def _best_kind(inst: Instance, model: int, tenants: list[int]) -> tuple[int, float] | None:
    """The pool's kind with the most capacity per dollar for these tenants' non-sheddable mix,
    and one replica's capacity (req/s) for it."""
    kinds = np.unique(inst.replica_kind[inst.replica_model == model])
    d = np.flatnonzero(
        (inst.unit_model == model)
        & np.isin(inst.unit_tenant, tenants)
        & ~inst.class_sheddable[inst.unit_class]
    )
    best: tuple[float, int, float] | None = None
    for k in kinds.tolist():
        cap = inst.capacity[d, k]
        if not (cap > 0).any():
            continue
        rate = inst.unit_rate[d][cap > 0]
        mix_cap = rate.sum() / (rate / cap[cap > 0]).sum()
        per_dollar = mix_cap / max(float(inst.kind_cost[k]), 1e-9)
        if best is None or per_dollar > best[0]:
            best = (per_dollar, k, float(mix_cap))
    return None if best is None else (best[1], best[2])


def explain_unserved_models(inst: Instance) -> list[str]:
    """Guaranteed demand for a model no healthy replica serves."""
    lines = []
    for m, name in enumerate(inst.models):
        if (inst.replica_healthy & (inst.replica_model == m)).any():
            continue
        floor, _ = inst.tenant_credits(m)
        for t in np.flatnonzero(floor > DEFICIT_TOLERANCE_RPS).tolist():
            lines.append(
                f"tenant '{inst.tenants[t]}' is guaranteed {floor[t]:.2f} req/s of {name} but "
                f"no healthy replica serves {name}: add replicas serving {name}"
            )
    return lines


def explain_slos(inst: Instance, model: int) -> list[str]:
    """Non-sheddable demand of tenants with a guarantee whose class SLO no replica kind of the
    pool can hold (it could only be shed, which its class forbids); none when the instance
    sheds such demand (:attr:`Instance.shed_unreachable`)."""
    if inst.shed_unreachable:
        return []
    kinds = np.unique(inst.replica_kind[inst.replica_healthy & (inst.replica_model == model)])
    if len(kinds) == 0:
        return []
    d = np.flatnonzero(
        (inst.unit_model == model)
        & ~inst.class_sheddable[inst.unit_class]
        & (inst.credit_share[inst.unit_tenant] > 0)
    )
    unreachable = d[(inst.capacity[d][:, kinds] <= 0).all(axis=1)]
    lines = []
    for t, c in sorted({(int(inst.unit_tenant[u]), int(inst.unit_class[u])) for u in unreachable}):
        sel = unreachable[
            (inst.unit_tenant[unreachable] == t) & (inst.unit_class[unreachable] == c)
        ]
        slo = inst.class_slo[c]
        accs = ", ".join(sorted({inst.kind_accelerator[k] for k in kinds.tolist()}))
        lines.append(
            f"class '{inst.classes[c]}' SLO (p95 TTFT ≤ {slo.ttft_p95_s:g} s, TPOT ≤ "
            f"{slo.tpot_p95_s:g} s) cannot hold for tenant '{inst.tenants[t]}''s "
            f"{inst.unit_rate[sel].sum():.2f} req/s of ~{inst.unit_input[sel].mean():.0f}-token "
            f"prompts on any replica kind of {inst.models[model]} ({accs}), even unloaded"
        )
    return lines


def explain_credits(inst: Instance, model: int, *, top_k: int) -> list[str]:
    """Which tenants' guaranteed credits do not fit in the pool, by how much, and the fix."""
    deficits = _pool_deficits(inst, model, top_k)
    if not deficits:
        return []
    floor, _ = inst.tenant_credits(model)
    name = inst.models[model]
    lines = []
    for t, short in sorted(deficits.items(), key=lambda kv: -kv[1]):
        lines.append(
            f"tenant '{inst.tenants[t]}' is guaranteed {floor[t]:.2f} req/s of non-sheddable "
            f"{name} traffic (credit {inst.credit_share[t]:.0%}) but only "
            f"{floor[t] - short:.2f} req/s fit at SLO: short by {short:.2f} req/s"
        )
    best = _best_kind(inst, model, list(deficits))
    if best is None:
        return lines
    kind, per_replica = best
    acc = inst.kind_accelerator[kind]
    total = sum(deficits.values())
    added = 0
    what_if = inst
    for _ in range(MAX_FIX_ROUNDS):
        step = max(1, math.ceil(total / max(per_replica, 1e-9)))
        added += step
        what_if = with_extra_replicas(inst, kind, added)
        left = _pool_deficits(what_if, model, top_k)
        total = sum(left.values())
        if not left:
            lines.append(
                f"+{added} {acc} replica{'s' if added > 1 else ''} of {name} would fix it "
                f"(~{per_replica:.2f} req/s each at SLO for this mix; "
                f"{sum(deficits.values()):.2f} req/s short in all)"
            )
            return lines
    lines.append(
        f"even +{added} {acc} replicas of {name} leave {total:.2f} req/s short: the guaranteed "
        "credits grow with the pool faster than it can serve them; lower the credit shares"
    )
    return lines
