"""Each kind of change alters the solver instance as intended, and only that."""

from __future__ import annotations

from typing import Any

import numpy as np

from placement.domain.accelerators import CATALOGUE
from placement.solver import build_instance
from placement.solver.instance import Instance
from placement.whatif.accelerators import scenario_accelerators
from placement.whatif.changes import scale_demand
from placement.whatif.inputs import base_workload, capacity_source, case_inputs
from placement.whatif.load import load_scenario
from placement.whatif.scenario import DemandChange, Scenario


def _instances(write: Any, doc: dict[str, Any]) -> tuple[Scenario, dict[str, Instance]]:
    s = load_scenario(write(doc))
    out = {}
    with scenario_accelerators(s.accelerators):
        for case in s.cases:
            inp = case_inputs(s, case)
            out[case.name] = build_instance(
                inp.fleet,
                inp.requests,
                inp.tenants,
                inp.classes,
                window_s=inp.window_s,
                capacity=capacity_source(s),
                block_tokens=inp.block_tokens,
            )
    return s, out


def _rate(inst: Instance, *, tenant: str | None = None, cls: str | None = None) -> float:
    mask = np.ones(inst.n_units, dtype=bool)
    if tenant is not None:
        mask &= np.asarray([inst.tenants[t] == tenant for t in inst.unit_tenant])
    if cls is not None:
        mask &= np.asarray([inst.classes[c] == cls for c in inst.unit_class])
    return float(inst.unit_rate[mask].sum())


def test_replicas_added_and_removed(doc: dict[str, Any], write: Any) -> None:
    doc["cases"] = [
        {
            "name": "more",
            "add_replicas": [
                {"accelerator": "h100", "count": 3},
                {"accelerator": "A100-80G", "count": 1},
            ],
        },
        {"name": "less", "remove_replicas": [{"kind": "l40s", "count": 1}]},
    ]
    _, inst = _instances(write, doc)
    assert inst["base"].n_replicas == 4
    more = inst["more"].replica_group
    assert more.count("h100") == 5 and more.count("a100-80g") == 1  # into the h100 group
    assert inst["less"].replica_ids == ("h100-0", "h100-1", "l40s-0")


def test_tenant_and_class_demand_multipliers(doc: dict[str, Any], write: Any) -> None:
    doc["cases"] = [
        {"name": "t0x3", "demand": {"tenants": {"tenant-0": 3.0}}},
        {"name": "no-batch", "demand": {"classes": {"batch": 0.0}}},
        {"name": "half", "demand": {"all": 0.5}},
    ]
    _, inst = _instances(write, doc)
    base, t0 = inst["base"], inst["t0x3"]
    assert abs(_rate(t0, tenant="tenant-0") - 3 * _rate(base, tenant="tenant-0")) < 1e-9
    assert abs(_rate(t0, tenant="tenant-1") - _rate(base, tenant="tenant-1")) < 1e-9
    assert _rate(inst["no-batch"], cls="batch") == 0.0
    assert _rate(inst["no-batch"], cls="interactive") == _rate(base, cls="interactive")
    ratio = _rate(inst["half"]) / _rate(base)
    assert 0.35 < ratio < 0.65  # thinned at random, about half


def test_thinning_is_deterministic_and_duplicates_keep_the_prefix() -> None:
    wl = base_workload("synthetic", 0, 10.0)
    a = scale_demand(wl.requests, DemandChange(all=1.5), seed=3)
    b = scale_demand(wl.requests, DemandChange(all=1.5), seed=3)
    assert [(r.arrival_s, r.tenant) for r in a] == [(r.arrival_s, r.tenant) for r in b]
    assert [r.id for r in a] == list(range(len(a)))
    twice = scale_demand(wl.requests, DemandChange(all=2.0), seed=3)
    assert len(twice) == 2 * len(wl.requests)
    with_prefix = next(r for r in wl.requests if len(r.block_hashes) > 1)
    copies = [
        r
        for r in twice
        if r.block_hashes[:-1] == with_prefix.block_hashes[:-1]
        and r.tenant == with_prefix.tenant
        and r.input_tokens == with_prefix.input_tokens
    ]
    assert len(copies) >= 2
    assert len({r.block_hashes[-1] for r in copies}) >= 2  # not byte-identical prompts


def test_slo_and_credit_changes(doc: dict[str, Any], write: Any) -> None:
    doc["cases"] = [
        {"name": "tight", "slos": {"interactive": {"ttft_slo_s": 0.5}}},
        {
            "name": "credits",
            "tenants": {
                "tenant-0": {"credit_share": 0.1},
                "tenant-7": {"credit_share": 0.2, "burst_cap": 0.5},
            },
        },
    ]
    _, inst = _instances(write, doc)
    ci = inst["tight"].classes.index("interactive")
    assert inst["tight"].class_slo[ci].ttft_p95_s == 0.5
    assert inst["base"].class_slo[ci].ttft_p95_s == 2.0
    t7 = inst["credits"].tenants.index("tenant-7")
    assert inst["credits"].credit_share[t7] == 0.2
    assert inst["credits"].burst_cap[t7] == 0.5
    assert inst["base"].credit_share[t7] < 0.1


def test_a_datasheet_accelerator_serves_for_the_case_only(doc: dict[str, Any], write: Any) -> None:
    doc["accelerators"] = [
        {"kind": "X1", "dense_bf16_tflops": 1500, "hbm_gb": 141, "hbm_tbps": 5, "cost_per_hour": 3}
    ]
    doc["base"]["fixed_capacity"]["X1"] = 20.0
    doc["cases"] = [{"name": "x", "add_replicas": [{"accelerator": "X1", "count": 2}]}]
    _, inst = _instances(write, doc)
    x = inst["x"]
    assert "X1" in x.kind_accelerator
    k = x.kind_accelerator.index("X1")
    assert x.kind_cost[k] == 3.0
    assert (x.capacity[:, k] == 20.0).all()
    assert "X1" not in CATALOGUE


def test_a_datasheet_accelerator_gets_a_roofline_kind() -> None:
    from models.capacity import replica_kind
    from models.roofline_prior import kind_roofline
    from placement.whatif.scenario import AcceleratorSpec

    fast = AcceleratorSpec(
        kind="X2", dense_bf16_tflops=2000, hbm_gb=192, hbm_tbps=8, cost_per_hour=6
    )
    with scenario_accelerators([fast]):
        x2 = kind_roofline(replica_kind("X2", "llama-3-8b", 1))
    l40s = kind_roofline(replica_kind("L40S", "llama-3-8b", 1))
    assert x2.linear_table[2048] < l40s.linear_table[2048]  # faster prefill
    assert x2.kv_capacity_tokens > l40s.kv_capacity_tokens  # more HBM


def test_capacity_is_tabulated_at_every_slo_the_cases_ask_for(
    doc: dict[str, Any], write: Any
) -> None:
    from models.capacity import Slo
    from placement.whatif.inputs import scenario_slos

    doc["sweep"] = {"vary": "slos.interactive.ttft_slo_s", "values": [0.5, 1.0]}
    levels = scenario_slos(load_scenario(write(doc)))
    assert Slo(0.5, 0.1) in levels and Slo(1.0, 0.1) in levels and Slo(2.0, 0.1) in levels
