"""The loop's re-plan never breaks the loop: a failed solve keeps the previous plan, says
why in a log line and records the status."""

from __future__ import annotations

import dataclasses
import logging
import math

import numpy as np
import pytest

import placement.solver.solve as solve_module
from bench.loop.plans import Planning
from placement.domain.fleet import fleet_from_dict
from placement.domain.prefix import chain_block_ids
from placement.domain.requests import DEFAULT_CLASSES, Request, Tenant
from placement.solver import FixedCapacity
from placement.solver.lp import LinearProgram, LpResult

FLEET = fleet_from_dict(
    {
        "name": "t",
        "replicas": [
            {"kind": "h100", "accelerator": "H100-SXM", "count": 2, "model": "llama-3-8b"}
        ],
    }
)


def _requests() -> list[Request]:
    return [
        Request(
            i,
            i / 2.0,
            1000,
            100,
            tenant="a",
            request_class="interactive",
            model="llama-3-8b",
            block_hashes=chain_block_ids([10 + i]),
        )
        for i in range(20)
    ]


def _planning() -> Planning:
    return Planning(
        fleet=FLEET,
        tenants={"a": Tenant(name="a", credit_share=0.5)},
        classes=DEFAULT_CLASSES,
        capacity=FixedCapacity({"H100-SXM": 10.0}),
        block_tokens=512,
        time_limit_s=2.0,
    )


def test_a_solver_failure_keeps_the_plan_and_is_logged(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    planning = _planning()
    first = planning.solve(_requests(), window_s=10.0)
    assert first is not None

    def invalid(lp: LinearProgram, *, backend: str, time_limit_s: float) -> LpResult:
        return LpResult("model_invalid", np.zeros(0), math.nan, math.inf, 0.0, "forced")

    monkeypatch.setattr(solve_module, "solve", invalid)
    with caplog.at_level(logging.WARNING, logger="bench.loop.plans"):
        again = planning.solve(_requests(), window_s=10.0, at_s=120.0, previous=first)
    assert again is None
    assert planning.records[-1].status == "failed"
    assert "kept the previous plan" in caplog.text and "failed" in caplog.text


def test_a_window_with_lora_traffic_gets_a_plan_with_adapter_residency() -> None:
    from bench.loop.cases import OWN_FLEET
    from placement.domain.fleet import load_fleet
    from placement.paths import repo_root
    from sim.workloads.trace_file import load_trace_file

    wl = load_trace_file(
        repo_root() / "data" / "samples" / "multi_model" / "multi_model_first1200.jsonl"
    )
    fleet = load_fleet(OWN_FLEET["multi-model"])
    planning = Planning(
        fleet=fleet,
        tenants=wl.tenants,
        classes=wl.classes,
        capacity=FixedCapacity({"H100-SXM": 40.0}),
        block_tokens=wl.block_tokens,
    )
    plan = planning.solve(wl.requests, window_s=wl.duration_s)
    assert plan is not None
    held = {r.id: set(r.adapters) for r in plan.replicas}
    assert plan.adapter_routes
    for route in plan.adapter_routes:
        # where the plan keeps the adapter, or on the swap replicas (which keep none)
        assert all(route.adapter in held[r] or not held[r] for r in route.route.replicas)
    routed = {a.adapter for a in plan.adapter_routes}
    assert routed == {r.adapter for r in wl.requests if r.adapter}  # every adapter has a route
    assert not held["h100-70b-0"] and not held["h100-70b-1"]  # no LoRA slots there


def test_the_warm_prefix_budget_reaches_the_plan() -> None:
    kv = FLEET.replicas[0].kv_capacity_tokens
    for share in (0.5, 0.8):
        planning = _planning()
        planning.warm_kv_share = share
        plan = planning.solve(_requests(), window_s=10.0)
        assert plan is not None
        assert {r.kv_budget_tokens for r in plan.replicas} == {int(share * kv)}


def test_an_infeasible_first_solve_drops_the_credit_floors_and_says_so(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # two tenants each guaranteed 90% of two replicas' 20 req/s, each asking 15 req/s
    reqs = [
        Request(n * 150 + i, i / 15.0, 1000, 100, tenant=t, model="llama-3-8b")
        for n, t in enumerate(("a", "b"))
        for i in range(150)
    ]
    planning = _planning()
    planning.tenants = {t: Tenant(name=t, credit_share=0.9) for t in ("a", "b")}
    with caplog.at_level(logging.WARNING, logger="bench.loop.plans"):
        first = planning.solve(reqs, window_s=10.0)
    assert first is not None
    assert planning.records[-1].status.endswith(
        "(credit floors dropped: infeasible with no plan to keep)"
    )
    assert "no plan to keep" in caplog.text
    # with a plan to keep, the same window keeps it
    again = planning.solve(reqs, window_s=10.0, at_s=120.0, previous=first)
    assert again is None and planning.records[-1].status == "infeasible"


class _ClassCapacity:
    """A fake capacity at SLO by accelerator and SLO level: tight (0.5 s) or loose."""

    source = "fake"

    def __init__(self, rates: dict[str, tuple[float, float]]) -> None:
        self.rates = rates

    def table(self, accelerator: str, model: str, tp: int) -> _ClassTable:
        return _ClassTable(self.rates[accelerator])


class _ClassTable:
    def __init__(self, rates: tuple[float, float]) -> None:
        self.rates = rates

    def slo_index(self, slo: object) -> int:
        return 0 if getattr(slo, "ttft_p95_s", 0.0) < 1.0 else 1

    def lookup(self, mean_input_tokens: float, output_tokens: float, slo_index: int) -> float:
        return self.rates[slo_index]


def test_the_tiers_plan_puts_interactive_on_fast_and_batch_on_cheap_accelerators() -> None:
    from bench.loop.cases import OWN_FLEET
    from placement.domain.fleet import load_fleet
    from placement.domain.tenancy import load_tenancy
    from placement.paths import repo_root
    from sim.workloads.tiers import TIERS_TENANTS
    from sim.workloads.trace_file import load_trace_file

    wl = load_trace_file(repo_root() / "data" / "samples" / "tiers" / "tiers_first800.jsonl")
    tenancy = load_tenancy(TIERS_TENANTS)
    fleet = load_fleet(OWN_FLEET["tiers"])
    # (tight SLO, loose SLO) req/s: an L40S barely holds the interactive class, and costs less
    # per batch req/s than an H100 (1.2 $/h / 5 vs 4 $/h / 10)
    capacity = _ClassCapacity(
        {"H100-SXM": (10.0, 10.0), "A100-80G": (3.0, 6.0), "L40S": (0.5, 5.0)}
    )
    planning = Planning(
        fleet=fleet,
        tenants=tenancy.tenants,
        classes=tenancy.classes,
        capacity=capacity,
        block_tokens=wl.block_tokens,
    )
    plan = planning.solve(wl.requests, window_s=wl.duration_s)
    assert plan is not None
    kind = {r.id: r.accelerator.kind for r in fleet.replicas}
    on = {d.tenant: {kind[r] for r in d.route.replicas} for d in plan.defaults}
    assert on["chat"] | on["code"] <= {"H100-SXM", "A100-80G"}
    assert on["evals"] == {"L40S"}


def test_a_solve_records_the_plans_predicted_attainment_and_shed() -> None:
    planning = _planning()
    plan = planning.solve(_requests(), window_s=10.0)
    assert plan is not None
    (record,) = planning.records
    assert record.predicted_attainment is not None and 0.9 < record.predicted_attainment <= 1
    assert record.shed_share == pytest.approx(0.0)


def test_plans_are_kept_by_version_only_when_asked() -> None:
    planning = _planning()
    assert planning.solve(_requests(), window_s=10.0) is not None
    assert planning.plans == {}
    keeping = dataclasses.replace(_planning(), keep_plans=True)
    plan = keeping.solve(_requests(), window_s=10.0)
    assert plan is not None and plan.version is not None
    assert keeping.plans == {plan.version: plan}
