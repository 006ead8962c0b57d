"""Capacity at SLO as the plan reads it, against one simulated replica."""

from __future__ import annotations

import json
from pathlib import Path

from bench.capacity_tables import (
    judge,
    kinds,
    run_capacity_bench,
    simulated_capacity,
    table_capacity,
    unit_arrivals,
)
from models.capacity import Slo
from placement.domain.fleet import load_fleet

FLEET = load_fleet("data/fleets/hetero.yaml")
H100 = kinds(FLEET)[0]


def test_one_replica_of_each_kind_is_measured() -> None:
    assert [s.accelerator.kind for s in kinds(FLEET)] == ["H100-SXM", "A100-80G", "L40S"]


def test_a_trickle_holds_the_slo_and_a_flood_does_not() -> None:
    arrivals = unit_arrivals(200, seed=0)
    slo = Slo(2.0, 0.1)
    trickle = judge(H100, 500, 50, 0.5, arrivals, slo)
    assert trickle.feasible and trickle.ttft_p95_s < 0.5
    flood = judge(H100, 500, 50, 2_000.0, arrivals, slo)
    assert not flood.feasible and flood.ttft_p95_s > 2.0


def test_the_capacity_found_holds_and_a_third_more_does_not() -> None:
    slo = Slo(2.0, 0.1)
    cap = simulated_capacity(H100, 500, 50, slo, requests=200, steps=6)
    arrivals = unit_arrivals(200, seed=0)
    assert cap > 1.0
    assert judge(H100, 500, 50, cap, arrivals, slo).feasible
    assert not judge(H100, 500, 50, cap * 1.35, arrivals, slo).feasible


def test_an_slo_no_idle_replica_meets_has_no_capacity() -> None:
    assert simulated_capacity(H100, 4_000, 20, Slo(0.001, 0.1), requests=50) == 0.0


def test_the_bench_writes_rows_with_both_capacities_and_their_ratio(tmp_path: Path) -> None:
    out = tmp_path / "capacity.json"
    one = load_fleet("data/fleets/h100x8.yaml")
    payload = run_capacity_bench(one, shapes=((500, 50),), out=out, say=lambda _m: None)
    (row,) = json.loads(out.read_text())["rows"]
    assert row == payload["rows"][0]
    assert row["roofline_rps"] == table_capacity(H100, 500, 50, None)
    assert row["roofline_vs_simulated"] == row["roofline_rps"] / row["simulated_rps"]
    assert payload["summary"]["roofline_vs_simulated_median"] == row["roofline_vs_simulated"]
