"""The loop moves base models: a re-plan that gives a replica another model swaps it in the
simulator, and the route path sends the new model's requests there once it serves."""

from __future__ import annotations

import dataclasses

from bench.loop.model_residency import DRAINING, LOADING, model_figures, model_intervals
from bench.loop.plans import Planning
from bench.loop.replan import Replanning
from bench.loop.run import BY_UTILISATION, STATIC_MODELS, Case, base_model_ablations
from bench.policies import PlacementPolicy, policy_for_plan
from placement.domain.fleet import fleet_from_dict
from placement.domain.requests import DEFAULT_CLASSES, Request, Tenant
from placement.solver import FixedCapacity
from sim.costmodel.factory import cost_model_for_replica
from sim.simulator import Simulator
from sim.workloads.base import Workload

GROUP = {
    "accelerator": "H100-SXM",
    "models": ["llama-3-8b", "qwen2-7b"],
    "weights_load_gbps": 10.0,
    "startup_s": 2.0,
}
FLEET = fleet_from_dict(
    {
        "name": "pool",
        "replicas": [
            {"kind": "a", "count": 3, "model": "llama-3-8b", **GROUP},
            {"kind": "b", "count": 1, "model": "qwen2-7b", **GROUP},
        ],
    }
)
SHIFT_S = 20.0


def _workload() -> Workload:
    """Llama at 30 req/s and Qwen at 5 for 20 s, then the other way round for 40 s."""
    reqs: list[Request] = []
    for model, before, after in (("llama-3-8b", 30, 5), ("qwen2-7b", 5, 30)):
        t = 0.0
        while t < 60.0:
            reqs.append(Request(0, t, 200, 20, tenant="t", model=model))
            t += 1.0 / (before if t < SHIFT_S else after)
    reqs.sort(key=lambda r: (r.arrival_s, r.model))
    for i, r in enumerate(reqs):
        r.id = i
    return Workload(name="shift", requests=reqs, tenants={})


def test_a_replan_swaps_a_replica_to_the_model_whose_demand_grew() -> None:
    wl = _workload()
    planning = Planning(
        fleet=FLEET,
        tenants={},
        classes=DEFAULT_CLASSES,
        capacity=FixedCapacity({"H100-SXM": 10.0}),
        block_tokens=16,
        time_limit_s=2.0,
    )
    head = [r for r in wl.requests if r.arrival_s < SHIFT_S]
    first = planning.solve(head, window_s=SHIFT_S)
    assert first is not None and planning.records[-1].swaps == ()  # 3 : 1 fits 30 : 5
    policy = policy_for_plan(first, 0, 16)
    assert isinstance(policy, PlacementPolicy)
    routing = Replanning(policy, planning, period_s=10.0, plan=first)
    result = Simulator(FLEET, routing, wl, cost_model=cost_model_for_replica).run()
    swaps = [s for rec in planning.records for s in rec.swaps]
    assert swaps and all(model == "qwen2-7b" for _, model in swaps)
    served = {e.replica for e in result.model_events if e.stage == "serve"}
    assert served and all(e.model == "qwen2-7b" for e in result.model_events)
    # the swapped replicas serve Qwen after their load, and nothing while they drain and load
    spans = model_intervals(result)
    for replica in served:
        mine = [(m, t0, t1) for r, m, t0, t1 in spans if r == replica]
        # (an idle replica drains in no time)
        assert [m for m, _, _ in mine if m != DRAINING] == ["llama-3-8b", LOADING, "qwen2-7b"]
        busy = [(t0, t1) for m, t0, t1 in mine if m in (DRAINING, LOADING)]
        start, end = busy[0][0], busy[-1][1]
        late = [r for r in result.requests if r.replica == replica and r.arrival_s > end]
        assert late and all(r.model == "qwen2-7b" for r in late)
        assert not [
            r for r in result.requests if r.replica == replica and start < r.arrival_s < end
        ]
    figures = model_figures(result)
    assert figures["swaps"] == figures["swaps_done"] == len(served)
    # nothing lost on the way
    assert not [r for r in result.requests if r.error.startswith("lost")]
    assert all(r.finish_s >= 0 for r in result.requests if not r.error)


def _demand(tenant_of: dict[str, str], rps: float, window_s: float) -> list[Request]:
    reqs: list[Request] = []
    for model, tenant in tenant_of.items():
        n = int(rps * window_s)
        reqs += [Request(0, i / rps, 200, 20, tenant=tenant, model=model) for i in range(n)]
    for i, r in enumerate(reqs):
        r.id = i
    return reqs


def test_the_planning_places_base_models_by_credit_when_asked() -> None:
    # 3 replicas' demand each on 4 replicas; Qwen's tenant holds 0.8 of the credits
    tenants = {
        "a": Tenant(name="a", credit_share=0.2),
        "b": Tenant(name="b", credit_share=0.8),
    }
    head = _demand({"llama-3-8b": "a", "qwen2-7b": "b"}, 30.0, SHIFT_S)
    held: dict[bool, int] = {}
    for by_credit in (False, True):
        planning = Planning(
            fleet=FLEET,
            tenants=tenants,
            classes=DEFAULT_CLASSES,
            capacity=FixedCapacity({"H100-SXM": 10.0}),
            block_tokens=16,
            time_limit_s=2.0,
            base_models_by_credit=by_credit,
        )
        assert planning.solve(head, window_s=SHIFT_S) is not None
        held[by_credit] = sum(1 for m in planning.residency.values() if m == "qwen2-7b")
    # utilisation: 3 / 3 against 3 / 1 balances at 2 : 2; by credit Qwen is owed 3.2 replicas
    assert held == {False: 2, True: 3}


def test_the_loop_ablates_the_rule_it_replaced_on_swappable_fleets_only() -> None:
    wl = _workload()
    case = Case(workload=wl, fleet=FLEET, peers=("chbl",), loads=(1.0,))
    assert base_model_ablations(case) == (STATIC_MODELS,)
    by_credit = dataclasses.replace(case, base_models_by_credit=True)
    assert base_model_ablations(by_credit) == (STATIC_MODELS, BY_UTILISATION)
    fixed = fleet_from_dict(
        {
            "name": "f",
            "replicas": [{"kind": "a", "accelerator": "H100-SXM", "count": 1, "model": "qwen2-7b"}],
        }
    )
    assert base_model_ablations(dataclasses.replace(by_credit, fleet=fixed)) == ()


def test_by_slots_the_plan_gives_a_model_replicas_for_its_adapters() -> None:
    slotted = {**GROUP, "max_loras": 4}
    fleet = fleet_from_dict(
        {
            "name": "pool",
            "replicas": [
                {"kind": "a", "count": 2, "model": "llama-3-8b", **slotted},
                {"kind": "b", "count": 2, "model": "qwen2-7b", **slotted},
            ],
        }
    )
    # 20 Llama adapters busy every second (5 replicas' slots) and Qwen: 2 replicas' work each
    reqs = [
        Request(0, t + 0.5, 200, 20, tenant="t", model="llama-3-8b", adapter=f"lora-{a}")
        for t in range(10)
        for a in range(20)
    ]
    reqs += [Request(0, t / 20, 200, 20, tenant="t", model="qwen2-7b") for t in range(200)]
    for i, r in enumerate(reqs):
        r.id = i

    def swaps(by_slots: bool) -> tuple[tuple[str, str], ...]:
        planning = Planning(
            fleet=fleet,
            tenants={},
            classes=DEFAULT_CLASSES,
            capacity=FixedCapacity({"H100-SXM": 10.0}),
            block_tokens=16,
            time_limit_s=2.0,
            base_models_by_slots=by_slots,
        )
        planning.solve(reqs, window_s=10.0)
        return planning.records[-1].swaps

    assert swaps(False) == ()  # by work alone 2 : 2 is balanced
    assert [model for _, model in swaps(True)] == ["llama-3-8b"]
