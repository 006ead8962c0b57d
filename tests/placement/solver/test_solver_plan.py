from __future__ import annotations

import numpy as np
import pytest

from placement.domain.fleet import Fleet, fleet_from_dict
from placement.domain.prefix import chain_block_ids
from placement.domain.requests import DEFAULT_CLASSES, Request, Tenant
from placement.errors import InfeasiblePlan
from placement.plan.diff import diff_plans
from placement.plan.validate import problems
from placement.solver import FixedCapacity, SolveOptions, build_instance, solve_plan
from placement.solver.candidates import select_candidates
from placement.solver.greedy import greedy_shares
from placement.solver.instance import Instance
from placement.solver.model import build_pool_model

CAP = FixedCapacity({"H100-SXM": 10.0, "L40S": 4.0})


def _fleet(h100: int = 2, l40s: int = 0) -> Fleet:
    groups = [{"kind": "h100", "accelerator": "H100-SXM", "count": h100, "model": "llama-3-8b"}]
    if l40s:
        groups.append({"kind": "l40s", "accelerator": "L40S", "count": l40s, "model": "llama-3-8b"})
    return fleet_from_dict({"name": "test", "replicas": groups})


def _requests(
    tenant: str,
    rate: float,
    cls: str,
    window: float = 10.0,
    prefix: int | None = None,
    start: int = 0,
) -> list[Request]:
    n = round(rate * window)
    out = []
    for i in range(n):
        blocks = (
            [prefix, prefix + 1, 9_000_000 + start + i]
            if prefix is not None
            else [start + i + 7_000_000]
        )
        out.append(
            Request(
                start + i,
                window * i / n,
                1200,
                100,
                tenant=tenant,
                request_class=cls,
                model="llama-3-8b",
                block_hashes=chain_block_ids(blocks),
            )
        )
    return out


def _served(plan, tenant: str) -> float:  # type: ignore[no-untyped-def]
    return next(t.admitted_rps for t in plan.tenants if t.tenant == tenant)


def test_known_optimum_sheds_the_sheddable_class_first() -> None:
    # 20 req/s of capacity; 12 interactive + 10 batch: 2 req/s of batch must go
    reqs = _requests("a", 12, "interactive") + _requests("b", 10, "batch", start=1000)
    tenants = {"a": Tenant(name="a", credit_share=0.5), "b": Tenant(name="b", credit_share=0.5)}
    inst = build_instance(_fleet(), reqs, tenants, DEFAULT_CLASSES, window_s=10.0, capacity=CAP)
    plan = solve_plan(inst, time_limit_s=5.0)
    assert plan.solver.status == "optimal"
    assert _served(plan, "a") == pytest.approx(12.0, abs=1e-6)
    assert _served(plan, "b") == pytest.approx(8.0, abs=1e-6)
    shed = {o.tenant: o.shed_share for o in plan.outcomes}
    assert shed["a"] == pytest.approx(0.0, abs=1e-9) and shed["b"] == pytest.approx(0.2, abs=1e-6)
    assert plan.solver.gap <= 1e-4 and plan.solver.bound >= plan.solver.objective
    assert problems(plan, fleet=_fleet()) == []


def test_cheaper_capacity_per_request_is_preferred() -> None:
    # 4 req/s fits on either kind; the H100 gives 10 req/s for $4/h, the L40S 4 req/s for
    # its catalogue price: whichever is cheaper per req/s takes all of it
    reqs = _requests("a", 4, "interactive")
    inst = build_instance(_fleet(1, 1), reqs, {"a": Tenant(name="a")}, window_s=10.0, capacity=CAP)
    plan = solve_plan(inst, time_limit_s=5.0)
    per_rps = {
        r.kind: r.cost_per_hour / CAP.rates[r.accelerator.kind] for r in _fleet(1, 1).replicas
    }
    best = min(per_rps, key=per_rps.__getitem__)
    planned = {r.kind: r.planned_rps for r in plan.replicas}
    assert planned[best] == pytest.approx(4.0, abs=1e-6)


def test_infeasible_credits_name_the_tenant_deficit_and_fix() -> None:
    reqs = _requests("a", 15, "interactive") + _requests("b", 15, "interactive", start=1000)
    tenants = {"a": Tenant(name="a", credit_share=0.9), "b": Tenant(name="b", credit_share=0.9)}
    inst = build_instance(_fleet(), reqs, tenants, window_s=10.0, capacity=CAP)
    with pytest.raises(InfeasiblePlan) as err:
        solve_plan(inst, time_limit_s=5.0)
    text = " ".join(err.value.explanation)
    assert "tenant 'a'" in text or "tenant 'b'" in text
    assert "short by 10.00 req/s" in text  # 30 guaranteed, 20 fit
    assert "+1 H100-SXM replica" in text


def _unreachable(*, shed: bool) -> Instance:
    """A guaranteed tenant whose interactive SLO no replica holds even unloaded."""
    return build_instance(
        _fleet(),
        _requests("a", 2, "interactive"),
        {"a": Tenant(name="a", credit_share=1.0)},
        window_s=10.0,
        capacity=FixedCapacity({"H100-SXM": 0.0}),
        shed_unreachable=shed,
    )


def test_unreachable_slo_is_explained() -> None:
    inst = _unreachable(shed=False)
    with pytest.raises(InfeasiblePlan, match="class 'interactive' SLO"):
        solve_plan(inst, time_limit_s=5.0)


def test_group_traffic_is_routed_warm_and_covered_by_a_default() -> None:
    reqs = _requests("a", 5, "interactive", prefix=11)
    inst = build_instance(_fleet(), reqs, {"a": Tenant(name="a")}, window_s=10.0, capacity=CAP)
    plan = solve_plan(inst, time_limit_s=5.0)
    assert len(plan.groups) == 1
    g = plan.groups[0]
    assert g.tenant == "a" and g.depth_blocks == 2 and set(g.warm) <= set(g.route.replicas)
    assert g.warm and [d.tenant for d in plan.defaults] == ["a"]


def test_warm_start_reduces_churn() -> None:
    rng = np.random.default_rng(0)
    reqs = []
    for k in range(30):
        reqs += _requests(
            f"t{k % 5}",
            float(rng.uniform(0.5, 2.0)),
            "interactive",
            prefix=100 * k + 1,
            start=1000 * k,
        )
    tenants = {f"t{i}": Tenant(name=f"t{i}", credit_share=0.1) for i in range(5)}
    fleet = _fleet(4, 2)
    inst = build_instance(fleet, reqs, tenants, window_s=10.0, capacity=CAP)
    first = solve_plan(inst, time_limit_s=5.0)
    # 10% demand shift: a few groups' rates change
    shifted = [r for r in reqs if not (r.tenant == "t0" and r.id % 3 == 0)]
    shifted += _requests("t1", 3.0, "interactive", prefix=100 * 6 + 1, start=500_000)
    inst2 = build_instance(fleet, shifted, tenants, window_s=10.0, capacity=CAP)
    cold = solve_plan(inst2, time_limit_s=5.0, version=2)
    warm = solve_plan(inst2, previous=first, time_limit_s=5.0)
    assert warm.version == 2 and warm.previous_version == 1
    assert warm.solver.churn <= diff_plans(first, cold).moved_share + 1e-9
    assert diff_plans(first, warm).moved_share < 0.2


def test_greedy_plan_respects_capacity() -> None:
    reqs = _requests("a", 30, "interactive")
    inst = build_instance(_fleet(), reqs, {"a": Tenant(name="a")}, window_s=10.0, capacity=CAP)
    cands = select_candidates(inst)
    pm = build_pool_model(inst, 0, cands)
    x = greedy_shares(inst, pm, np.zeros(len(cands)))
    util = np.bincount(pm.pair_replica, x * pm.load, inst.n_replicas)
    assert np.all(util <= 1.0 + 1e-9) and x.sum() == pytest.approx(20 / 30)


@pytest.mark.parametrize("backend", ["mathopt-glop", "cp-sat"])
def test_other_backends_reach_the_same_optimum(backend: str) -> None:
    reqs = _requests("a", 12, "interactive") + _requests("b", 10, "batch", start=1000)
    tenants = {"a": Tenant(name="a", credit_share=0.5), "b": Tenant(name="b", credit_share=0.5)}
    inst = build_instance(_fleet(), reqs, tenants, window_s=10.0, capacity=CAP)
    plan = solve_plan(inst, time_limit_s=5.0, options=SolveOptions(backend=backend))
    assert _served(plan, "a") == pytest.approx(12.0, abs=0.05)
    assert _served(plan, "b") == pytest.approx(8.0, abs=0.1)


def test_unreachable_demand_is_shed_when_asked() -> None:
    inst = _unreachable(shed=True)
    assert inst.unreachable(np.arange(inst.n_units)).all()
    plan = solve_plan(inst, time_limit_s=5.0)
    (outcome,) = plan.outcomes
    assert outcome.served_rps == 0.0 and outcome.shed_share == 1.0


def test_a_prefix_sent_to_two_models_gets_a_group_per_model() -> None:
    # one system prompt in front of two models' traffic: each model's group must route to
    # that model's pool (one group per (tenant, key) mixed the pools and failed validation)
    fleet = fleet_from_dict(
        {
            "name": "two-models",
            "replicas": [
                {"kind": "llama", "accelerator": "H100-SXM", "count": 2, "model": "llama-3-8b"},
                {"kind": "qwen", "accelerator": "H100-SXM", "count": 2, "model": "qwen2.5-32b"},
            ],
        }
    )
    reqs = []
    for i in range(400):
        model = ("llama-3-8b", "qwen2.5-32b")[i % 2]
        blocks = chain_block_ids([11, 12, 13, 1_000_000 + i])
        reqs.append(Request(i, i / 40, 2048, 100, tenant="a", model=model, block_hashes=blocks))
    inst = build_instance(fleet, reqs, {}, DEFAULT_CLASSES, capacity=CAP)
    plan = solve_plan(inst, time_limit_s=5.0)
    shared = [g for g in plan.groups if g.key == chain_block_ids([11, 12, 13])[-1]]
    assert sorted(g.model for g in shared) == ["llama-3-8b", "qwen2.5-32b"]
    pool = {r.id: r.model.name for r in fleet.replicas}
    assert all(pool[r] == g.model for g in shared for r in g.route.replicas)
    assert problems(plan, fleet=fleet) == []


def _documents(rates: list[float], blocks: int, window: float = 10.0) -> list[Request]:
    """One tenant's requests over documents of ``blocks`` 512-token blocks each, document ``i``
    at ``rates[i]`` req/s; every request adds one block of its own."""
    out: list[Request] = []
    for doc, rate in enumerate(rates):
        chain = chain_block_ids(range(doc * 1000, doc * 1000 + blocks))
        n = round(rate * window)
        for i in range(n):
            rid = len(out)
            out.append(
                Request(
                    rid,
                    window * i / n,
                    (blocks + 1) * 512,
                    100,
                    tenant="a",
                    model="llama-3-8b",
                    block_hashes=chain + chain_block_ids([5_000_000 + rid], root=chain[-1]),
                )
            )
    return out


def test_warm_prefixes_are_packed_within_each_replicas_kv_budget() -> None:
    # six documents of 150 blocks (76,800 tokens) on two H100s whose plan budget is half
    # their KV memory (~205k tokens): two documents fit per replica, four of six in all
    fleet = _fleet(h100=2)
    rates = [3.0, 2.5, 2.0, 1.5, 0.6, 0.4]
    inst = build_instance(
        fleet, _documents(rates, 150), {"a": Tenant(name="a")}, window_s=10.0, capacity=CAP
    )
    assert set(inst.replica_kv_budget) == {0.5 * fleet.replicas[0].kv_capacity_tokens}
    plan = solve_plan(inst, time_limit_s=5.0)
    for r in plan.replicas:
        assert 0 < r.warm_prefix_tokens <= r.kv_budget_tokens
    warm = {g.key: g for g in plan.groups if g.warm}
    assert len(warm) == 4
    # the busiest documents are the ones kept warm (they save the most prefill)
    kept = sorted((g.rate_rps for g in warm.values()), reverse=True)
    assert kept == pytest.approx(rates[:4])
    assert problems(plan, fleet=fleet) == []


def test_a_larger_kv_budget_keeps_more_documents_warm() -> None:
    fleet = _fleet(h100=2)
    reqs = _documents([3.0, 2.5, 2.0, 1.5, 0.6, 0.4], 150)
    tenants = {"a": Tenant(name="a")}
    counts = []
    for share in (0.5, 0.8):
        inst = build_instance(
            fleet, reqs, tenants, window_s=10.0, capacity=CAP, warm_kv_share=share
        )
        plan = solve_plan(inst, time_limit_s=5.0)
        assert all(r.warm_prefix_tokens <= r.kv_budget_tokens for r in plan.replicas)
        counts.append(sum(1 for g in plan.groups if g.warm))
    assert counts == [4, 6]
