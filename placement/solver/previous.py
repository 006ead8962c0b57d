"""The previous plan seen from a new instance: per (unit, replica) the share it routed there.

Groups are matched by (tenant, model, key), defaults by (tenant, model); every class of a group or
default inherits its route. Replicas the new fleet lacks are dropped and the rest renormalised
(their traffic must move anyway; it is not counted as churn the new plan causes).
"""

from __future__ import annotations

import numpy as np

from placement.plan.schema import Plan, Route
from placement.solver.instance import FloatArray, Instance, IntArray


def previous_shares(inst: Instance, plan: Plan | None) -> tuple[IntArray, IntArray, FloatArray]:
    """``(unit, replica, share)`` arrays of the previous plan's routes for this instance."""
    empty_i = np.zeros(0, dtype=np.int64)
    if plan is None:
        return empty_i, empty_i, np.zeros(0)
    index = {rid: i for i, rid in enumerate(inst.replica_ids)}
    groups: dict[tuple[str, str, int], Route] = {
        (g.tenant, g.model, g.key): g.route for g in plan.groups
    }
    defaults: dict[tuple[str, str], Route] = {(d.tenant, d.model): d.route for d in plan.defaults}
    units: list[int] = []
    reps: list[int] = []
    shares: list[float] = []
    for d in range(inst.n_units):
        tenant = inst.tenants[inst.unit_tenant[d]]
        model = inst.models[inst.unit_model[d]]
        key = int(inst.unit_key[d])
        route = groups.get((tenant, model, key)) if key >= 0 else defaults.get((tenant, model))
        if route is None:
            continue
        pairs = [
            (index[r], w) for r, w in zip(route.replicas, route.weights, strict=True) if r in index
        ]
        total = sum(w for _, w in pairs)
        for r, w in pairs:
            units.append(d)
            reps.append(r)
            shares.append(w / total)
    return (
        np.asarray(units, dtype=np.int64),
        np.asarray(reps, dtype=np.int64),
        np.asarray(shares, dtype=np.float64),
    )


def pair_shares(
    pair_unit: IntArray,
    pair_replica: IntArray,
    prev: tuple[IntArray, IntArray, FloatArray],
    n_r: int,
) -> FloatArray:
    """The previous share of each candidate pair (0 where the previous plan had none)."""
    pu, pr, ps = prev
    out = np.zeros(len(pair_unit))
    if len(pu) == 0 or len(pair_unit) == 0:
        return out
    code = pair_unit * n_r + pair_replica
    prev_code = pu * n_r + pr
    pos = np.searchsorted(code, prev_code)
    pos = np.minimum(pos, len(code) - 1)
    hit = code[pos] == prev_code
    np.add.at(out, pos[hit], ps[hit])
    return out
