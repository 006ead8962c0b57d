"""Running cases: rows per case, churn against the base plan, infeasible cases reported as
rows, and the same answers from a real Dask LocalCluster."""

from __future__ import annotations

import json
from typing import Any

from bench.policies import policy_for_plan
from placement.plan.schema import Plan
from placement.whatif.load import load_scenario
from placement.whatif.run import run_scenario


def test_cases_run_in_order_with_plans_and_churn(doc: dict[str, Any], write: Any) -> None:
    doc["cases"] = [
        {"name": "more", "add_replicas": [{"accelerator": "H100-SXM", "count": 2}]},
        {"name": "busier", "demand": {"all": 3.0}},
    ]
    res = run_scenario(load_scenario(write(doc)), sync=True).cases
    assert [r.case for r in res] == ["base", "more", "busier"]
    base, more, busier = res
    assert base.churn is None and more.churn is not None
    assert more.cost_per_hour == base.cost_per_hour + 2 * 4.0
    assert busier.demand_rps > 2.5 * base.demand_rps
    for r in res:
        assert r.solved and r.attainment is not None
        plan = Plan.from_json(r.plan_json or "")
        assert len(plan.replicas) == r.replicas
        assert set(r.attainment_by_class) <= {"interactive", "batch"}
        # of admitted traffic: wholly shed tenants have none
        assert len(r.attainment_by_tenant) <= 8


def test_more_demand_than_capacity_is_shed(doc: dict[str, Any], write: Any) -> None:
    doc["cases"] = [{"name": "flood", "demand": {"all": 8.0}}]
    base, flood = run_scenario(load_scenario(write(doc)), sync=True).cases
    assert (base.shed_share or 0.0) < 0.01
    assert (flood.shed_share or 0.0) > 0.3
    # attainment is of the admitted traffic: shed is its own column, not counted as missed
    outs = flood.outcomes
    served = sum(o["served_rps"] for o in outs)
    admitted = sum(o["served_rps"] * o["predicted_attainment"] for o in outs) / served
    assert abs((flood.attainment or 0.0) - admitted) < 1e-9


def test_an_infeasible_case_is_a_row_not_a_crash(doc: dict[str, Any], write: Any) -> None:
    # L40S capacity 0: no replica can hold the SLO once the H100s are gone
    doc["base"]["fixed_capacity"]["L40S"] = 0.0
    doc["cases"] = [
        {"name": "no-h100", "remove_replicas": [{"accelerator": "H100-SXM", "count": 2}]},
        {"name": "ok", "add_replicas": [{"accelerator": "H100-SXM", "count": 1}]},
    ]
    base, bad, ok = run_scenario(load_scenario(write(doc)), sync=True).cases
    assert bad.status == "infeasible"
    assert bad.explanation and not bad.solved and bad.attainment is None
    assert bad.replicas == 2 and bad.cost_per_hour == 2 * 1.2
    assert base.solved and ok.solved


def test_a_local_cluster_gives_the_same_rows(doc: dict[str, Any], write: Any) -> None:
    from distributed import Client, LocalCluster

    doc["accelerators"] = [
        {"kind": "X1", "dense_bf16_tflops": 1500, "hbm_gb": 141, "hbm_tbps": 5, "cost_per_hour": 3}
    ]
    doc["base"]["fixed_capacity"]["X1"] = 20.0
    doc["cases"] = [{"name": "x", "add_replicas": [{"accelerator": "X1", "count": 1}]}]
    scenario = load_scenario(write(doc))
    local = run_scenario(scenario, sync=True).cases
    done: list[str] = []
    with (
        LocalCluster(
            n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        Client(cluster) as client,
    ):
        remote = run_scenario(scenario, client=client, progress=done.append).cases
    assert sorted(done) == ["base", "x"]
    assert [r.case for r in remote] == ["base", "x"]
    for a, b in zip(local, remote, strict=True):
        assert (a.status, a.fleet, a.cost_per_hour) == (b.status, b.fleet, b.cost_per_hour)
        assert abs((a.attainment or 0) - (b.attainment or 0)) < 1e-6


def test_the_plan_runs_in_the_simulator_beside_its_prediction(
    doc: dict[str, Any], write: Any
) -> None:
    (base,) = run_scenario(load_scenario(write(doc)), sync=True, simulate=policy_for_plan).cases
    sim = base.simulated
    assert sim is not None, "the placement routing policy is missing"
    assert 0.0 <= sim["attainment"] <= 1.0
    assert set(sim["attainment_by_class"]) == {"interactive", "batch"}
    assert sim["requests"] == round(base.demand_rps * 10)


def test_every_case_says_where_its_timings_come_from(
    doc: dict[str, Any], write: Any, tmp_path: Any
) -> None:
    from placement.whatif.report import timing_summary, timing_table, write_results

    doc["accelerators"] = [
        {"kind": "X9", "dense_bf16_tflops": 900, "hbm_gb": 96, "hbm_tbps": 4, "cost_per_hour": 3}
    ]
    doc["base"]["fixed_capacity"]["X9"] = 8.0
    doc["cases"] = [{"name": "x9", "add_replicas": [{"accelerator": "X9", "count": 1}]}]
    spec = load_scenario(write(doc))
    base, x9 = run_scenario(spec, sync=True).cases
    assert {s["accelerator"]: s["source"] for s in base.timing_sources} == {
        "H100-SXM": "profiles",
        "L40S": "profiles",
    }
    new = next(s for s in x9.timing_sources if s["accelerator"] == "X9")
    assert new["source"] == "roofline only" and new["model"] == "llama-3-8b"
    assert "X9: roofline only" in timing_summary(x9.timing_sources)
    assert timing_table([base, x9]).row_count == 3
    write_results(spec, [base, x9], tmp_path / "out")
    payload = json.loads((tmp_path / "out" / "whatif.json").read_text())
    assert payload["timing_sources"]["x9"] == x9.timing_sources
    assert "H100-SXM: profiles" in payload["cases"][0]["timing_sources"]
