"""The greedy plan: what is published when the solver finds nothing in time, and a hint.

Units in order of importance (non-sheddable first, then priority, then the larger rate); each
takes the candidate replicas with the most capacity per dollar first (the previous plan's
replicas before others), filling each up to its utilisation cap, within its tenant's cap.
No floor is guaranteed: a greedy plan can only be as good as its order.
"""

from __future__ import annotations

import numpy as np

from placement.solver.instance import FloatArray, Instance
from placement.solver.model import UTILISATION_CAP, PoolModel


def greedy_shares(inst: Instance, pm: PoolModel, prev_share: FloatArray) -> FloatArray:
    """Per candidate pair of the pool, the share of its unit the greedy plan sends there."""
    # greedy serves groups warm only (no KV check: a fallback, not an optimum)
    pu, pr, load = pm.pair_unit, pm.pair_replica, pm.load
    x = np.zeros(len(pu))
    if len(pu) == 0:
        return x
    util = np.zeros(inst.n_replicas)
    served = np.zeros(len(inst.tenants))
    cls = inst.unit_class[pu]
    per_dollar = 1.0 / np.maximum(load * inst.replica_cost[pr], 1e-12)
    # pairs sorted by unit importance, then previous share, then capacity per dollar
    order = np.lexsort(
        (
            -per_dollar,
            -prev_share,
            -inst.unit_rate[pu],
            inst.class_priority[cls],
            inst.class_sheddable[cls],
        )
    )
    left = np.ones(inst.n_units)
    for p in order.tolist():
        d, r = int(pu[p]), int(pr[p])
        t = int(inst.unit_tenant[d])
        if left[d] <= 1e-9:
            continue
        room = (UTILISATION_CAP - util[r]) / load[p]
        tenant_room = (pm.cap[t] - served[t]) / max(float(inst.unit_rate[d]), 1e-12)
        take = min(left[d], room, tenant_room)
        if take <= 1e-9:
            continue
        x[p] = take
        left[d] -= take
        util[r] += take * load[p]
        served[t] += take * inst.unit_rate[d]
    return x
