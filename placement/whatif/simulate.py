"""The same plan run in the simulator: the case's fleet and demand, routed by the service's
route path (the ``placement`` routing policy) with the case's plan, so predicted and simulated
attainment can be read side by side.

The simulator builds a replica's engine from measured operator profiles where its accelerator
has them and from the roofline otherwise (a scenario's datasheet accelerator always takes the
roofline). The caller supplies the policy that runs the plan (``policy_for``: the service's
route path, :func:`bench.policies.policy_for_plan`), so what-if needs nothing above itself.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from placement.plan.schema import Plan
from placement.whatif.inputs import CaseInputs
from sim.costmodel.factory import cost_model_for_replica
from sim.metrics import request_table, summarise
from sim.router import RoutingPolicy
from sim.simulator import SimConfig, Simulator
from sim.workloads.base import Workload

#: Builds the routing policy that serves ``plan``: (plan, seed, prefix block tokens) → policy.
PlanPolicy = Callable[[Plan, int, int], RoutingPolicy]


def simulate_plan(
    inputs: CaseInputs, plan: Plan, *, seed: int, policy_for: PlanPolicy
) -> dict[str, Any]:
    """Simulated SLO attainment (overall, per class, per tenant) and goodput of ``plan``."""
    policy = policy_for(plan, seed, inputs.block_tokens)
    workload = Workload(
        name="whatif",
        requests=[r.unserved() for r in inputs.requests],  # the simulator fills in outcomes
        tenants=dict(inputs.tenants),
        classes=dict(inputs.classes),
        block_tokens=inputs.block_tokens,
    )
    sim = Simulator(
        inputs.fleet, policy, workload, cost_model=cost_model_for_replica, config=SimConfig()
    )
    result = sim.run()
    metrics = summarise(result, workload)
    table = request_table(result.requests, workload.classes)
    by_tenant = {
        str(t): float(table.met[table.tenant == t].mean()) for t in np.unique(table.tenant)
    }
    return {
        "attainment": metrics.slo_attainment,
        "attainment_by_class": dict(metrics.attainment_by_class),
        "attainment_by_tenant": by_tenant,
        "goodput_rps": metrics.goodput_rps,
        "ttft_p95_s": metrics.ttft_p95_s,
        "tpot_p95_s": metrics.tpot_p95_s,
        "refused": metrics.refused,
        "requests": metrics.requests,
        "sim_wall_s": result.wall_s,
    }
