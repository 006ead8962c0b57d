"""Pooled predicted attainment: the TTFT wait of a pool of replicas as the route path runs it.

The route path does not keep a unit's traffic on the replicas the plan splits it over: a
request goes to whichever replica of its pool has room (the plan steers, live load decides),
so a burst of one unit spreads over the pool, and a pool of ``c`` replicas queues like one
multi-server queue rather than ``c`` separate ones at a ``1/c`` share of each unit. Here:

* **Pools**: the replicas the plan sends traffic to that can serve the same requests — the
  same model and the same class reach (:attr:`~placement.solver.instance.Instance.replica_classes`).
* **What the split still fixes**: each replica's planned mix decides which kinds the pool has
  and the decode batch each replica runs, so a request's work on the prefill server, its own
  latency and its TPOT are those of the replica the plan sends it to
  (:func:`~placement.solver.attainment.replica_service`, unchanged).
* **The wait is the pool's**: the fluid backlog of the pool's whole work per bin (each unit's
  measured arrivals, times the work they take where the plan sends them) over the pool's
  summed capacity, plus the short-scale wait inside a bin at the pool's utilisation on ``c``
  servers — Allen–Cunneen's M/G/c mean (Erlang C × the M/M/c wait × ``(1 + c_s²)/2``) with
  its exponential tail (:func:`~placement.solver.attainment.ttft_meet` with ``servers = c``).
  A pool of one replica is the per-replica model exactly.

Servers of different kinds are taken as equal servers of the work they are planned to do (a
replica's second of work is a second of its own kind's work): the pool's utilisation is the
mean of its replicas'. Replicas the plan gives nothing are left out of the pool (the route path
may still send them spill traffic). Only admitted traffic is counted, and a replica carries its
weight of a partly shed unit's traffic, as in the per-replica model.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Literal

import numpy as np

from placement.solver.attainment import (
    _cost_model,
    _linear_table,
    _prefill_table,
    by_replica,
    kind_name,
    pair_arrivals,
    per_pool,
    plan_pairs,
    replica_load,
    replica_service,
    ttft_meet,
)
from placement.solver.instance import FloatArray, Instance

#: the models of a plan's reported predicted attainment: each replica its own queue, or each
#: pool one multi-server queue
AttainmentModel = Literal["replica", "pooled"]
#: the route path's plan pickers that pool: they score a planned request over the model's
#: replicas by live load (``plan_picker: scored``, data/profiles/scored.yaml); the weighted
#: lookup (the default profile) follows the plan's split, and ``warm``/``planned`` score
#: among the plan's own replicas only (a pool per route, not modelled: per replica)
POOLING_PLAN_PICKERS = ("scored",)


def attainment_for(plan_picker: str) -> AttainmentModel:
    """The attainment model of the route path a plan runs on, by its profile's plan picker."""
    return "pooled" if plan_picker in POOLING_PLAN_PICKERS else "replica"


def pool_key(inst: Instance, r: int) -> tuple[int, tuple[bool, ...]]:
    """Replica ``r``'s pool: its model and the classes it serves (all when not split)."""
    reach = tuple(bool(c) for c in inst.replica_classes[r]) if inst.replica_classes.size else ()
    return int(inst.replica_model[r]), reach


def pooled_meet(
    inst: Instance,
    pair_unit: list[np.ndarray],
    pair_replica: list[np.ndarray],
    pair_rate: list[np.ndarray],
    pair_warm: list[np.ndarray],
) -> list[FloatArray]:
    """Per pool's (unit, replica) pairs (the solver's pools, one per model): the probability
    a request sent on that pair meets its SLO, its wait that of the replicas' pool."""
    pairs = plan_pairs(inst, pair_unit, pair_replica, pair_rate, pair_warm)
    meet = np.ones(len(pairs.units))
    pools: dict[tuple[int, tuple[bool, ...]], list[np.ndarray]] = defaultdict(list)
    for idx in by_replica(pairs):
        pools[pool_key(inst, int(pairs.replicas[idx[0]]))].append(idx)
    for members in pools.values():
        work, own, tpot_ok = [], [], []
        for idx in members:
            name = kind_name(inst, int(pairs.replicas[idx[0]]))
            svc = replica_service(
                replica_load(pairs, idx),
                _cost_model(*name),
                _prefill_table(*name),
                _linear_table(*name),
            )
            work.append(svc.work)
            own.append(svc.own)
            tpot_ok.append(svc.tpot_ok)
        idx = np.concatenate(members)
        scv = pairs.prompt_scv[idx] if pairs.prompt_scv is not None else np.zeros(len(idx))
        slack = pairs.ttft[idx, None] - np.concatenate(own)
        ttft_ok = ttft_meet(
            pairs.rate[idx],
            np.concatenate(work),
            scv,
            slack,
            pair_arrivals(inst, pairs, idx),
            inst.arrival_bin_s,
            servers=len(members),
        )
        meet[idx] = np.clip(ttft_ok * np.concatenate(tpot_ok), 0.0, 1.0)
    return per_pool(meet, pair_unit)
