"""Each tenant alone on the accelerator kinds that served it: what those replicas give its
traffic when nothing else shares them, beside what it got in our run.

The fluid bound (:mod:`bench.loop.bound`) charges capacity at SLO as a steady rate per slice:
it cannot see a tenant whose own arrivals, within a second, put prompt chunks into every
decode step of its short answers (on ``tiers``: Azure code completions, 13-token decodes
under a 40-ms TPOT on H100s whose decode step carrying a 2,048-token chunk takes 53 ms). The
bound then counts as servable what no placement serves. Rerunning the tenant's own requests,
alone, on every replica of the kinds that served it (least-outstanding routing, no gate) says
how much of its shortfall is its own traffic on those accelerators, and how much is what it
shares them with. An empirical reference, not a bound: one policy on a sub-fleet.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np

from bench.loop.class_placement import REFUSED, served_kinds
from placement.domain.fleet import Fleet
from sim.costmodel.factory import cost_model_for_replica
from sim.metrics import request_table
from sim.peers.context import PolicyContext
from sim.simulator import SimConfig, SimResult, Simulator
from sim.workloads.base import Workload

ALONE_POLICY = "least_outstanding"
KIND_SHARE = 0.1  # a kind counts as one that served a tenant from this share of its requests


def tenant_kinds(result: SimResult) -> dict[str, list[str]]:
    """Per tenant, the accelerator kinds that served at least :data:`KIND_SHARE` of the
    requests it had served in ``result``, most used first."""
    kinds = served_kinds(result)
    tenants = np.asarray([r.tenant for r in result.requests], dtype=np.str_)
    out: dict[str, list[str]] = {}
    for tenant in sorted(set(tenants.tolist())):
        served = kinds[(tenants == tenant) & (kinds != REFUSED)]
        names, counts = np.unique(served, return_counts=True)
        order = np.argsort(-counts, kind="stable")
        out[tenant] = [
            str(names[i]) for i in order if counts[i] >= KIND_SHARE * max(len(served), 1)
        ]
    return out


def alone_figures(
    result: SimResult,
    target: Workload,
    fleet: Fleet,
    make_policy: Callable[[str, PolicyContext], Any],
    *,
    seed: int = 0,
) -> dict[str, dict[str, Any]]:
    """For each tenant of ``target`` (the workload ``result`` routed, at its load; its requests
    are copied unserved, so a routed workload will do): the kinds
    that served it, its attainment in ``result`` (``ours``), and its attainment with its own
    requests alone on every replica of those kinds (``alone``, :data:`ALONE_POLICY`)."""
    ours = request_table(result.requests, target.classes)
    figures: dict[str, dict[str, Any]] = {}
    for tenant, kinds in tenant_kinds(result).items():
        mask = ours.tenant == tenant
        entry: dict[str, Any] = {
            "requests": int(mask.sum()),
            "kinds": kinds,
            "ours": float(ours.met[mask].mean()) if mask.any() else None,
            "alone": None,
        }
        replicas = tuple(r for r in fleet.replicas if r.accelerator.kind in kinds)
        own = [r.unserved(arrival_s=r.arrival_s) for r in target.requests if r.tenant == tenant]
        if replicas and own:
            sub = dataclasses.replace(fleet, replicas=replicas)
            wl = Workload(
                name=f"{target.name}:{tenant}",
                requests=own,
                tenants=target.tenants,
                classes=target.classes,
                block_tokens=target.block_tokens,
                adapters=target.adapters,
            )
            context = PolicyContext(seed=seed, block_tokens=wl.block_tokens)
            policy = make_policy(ALONE_POLICY, context)
            run = Simulator(
                sub, policy, wl, cost_model=cost_model_for_replica, config=SimConfig()
            ).run()
            alone = request_table(run.requests, wl.classes)
            entry["alone"] = float(alone.met.mean())
        figures[tenant] = entry
    return figures
