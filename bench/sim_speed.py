"""Simulator speed: a million requests on a hundred replicas, timed on this machine."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from bench.policies import PolicyContext, make_policy
from placement.domain.fleet import fleet_from_dict
from placement.report import print_table, write_json
from sim.capacity import rate_for_load
from sim.costmodel.factory import cost_model_for_replica
from sim.simulator import Simulator
from sim.workloads.synthetic import synthetic_tenants


def run_sim_speed(
    *,
    requests: int = 1_000_000,
    replicas: int = 100,
    load: float = 0.8,
    policy: str = "least_outstanding",
    repeats: int = 1,
    seed: int = 0,
    out: Path | None = None,
) -> dict[str, Any]:
    """Simulate ``requests`` synthetic multi-tenant requests on ``replicas`` H100s.

    Only the event loop is timed (``wall_s``, median of ``repeats``); generating the
    workload is reported apart (``generate_s``).
    """
    import time

    fleet = fleet_from_dict(
        {
            "name": f"h100x{replicas}",
            "replicas": [
                {
                    "kind": "h100",
                    "accelerator": "H100-SXM",
                    "count": replicas,
                    "model": "llama-3-8b",
                }
            ],
        }
    )
    t0 = time.perf_counter()
    probe = synthetic_tenants(duration_s=600.0, rate_rps=50.0, seed=seed)
    rate = rate_for_load(load, fleet, probe, cost_model_for_replica) * 50.0
    base = synthetic_tenants(duration_s=requests / rate, rate_rps=rate, seed=seed)
    generate_s = time.perf_counter() - t0
    walls: list[float] = []
    result = None
    for _ in range(repeats):
        wl = base.scaled(1.0)
        ctx = PolicyContext(seed=seed, block_tokens=wl.block_tokens)
        sim = Simulator(fleet, make_policy(policy, ctx), wl, cost_model=cost_model_for_replica)
        result = sim.run()
        walls.append(result.wall_s)
    assert result is not None
    wall = statistics.median(walls)
    row = {
        "requests": len(base),
        "replicas": replicas,
        "policy": policy,
        "load": load,
        "simulated_s": result.end_s,
        "events": result.events,
        "wall_s": wall,
        "requests_per_s": len(base) / wall,
        "generate_s": generate_s,
        "repeats": repeats,
    }
    print_table("simulator speed", [row], list(row))
    if out is not None:
        write_json(out, row)
    return row
