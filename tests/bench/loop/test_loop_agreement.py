"""Each loop plan's prediction against what the simulator measured while it was installed."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from bench.loop.agreement import (
    at_planned_load,
    off_plan_share,
    plan_agreement,
    replica_breakdown,
)
from bench.loop.plans import SolveRecord
from placement.domain.requests import DEFAULT_CLASSES, Request


def _served(i: int, at: float, ttft: float, error: str = "") -> Request:
    r = Request(i, at, 1000, 10, tenant="a", request_class="interactive")
    if error:
        r.error = error
        return r
    r.first_token_s = at + ttft
    r.finish_s = at + ttft + 0.01 * 9
    return r


def _record(at: float, predicted: float | None) -> SolveRecord:
    return SolveRecord(
        at_s=at,
        reason="period",
        status="optimal" if predicted is not None else "infeasible",
        solve_s=0.1,
        churn=0.0,
        version=1 if predicted is not None else None,
        predicted_attainment=predicted,
        shed_share=0.0 if predicted is not None else None,
    )


def test_each_plan_is_judged_on_the_span_it_served_and_refusals_are_left_out() -> None:
    slo = DEFAULT_CLASSES["interactive"].ttft_slo_s
    # plan 1 serves [0, 100): 60 met, 20 missed, 20 refused; plan 2 from 100 s: 60 all met
    reqs = [_served(i, i * 0.5, slo / 2) for i in range(60)]
    reqs += [_served(60 + i, 30 + i * 0.5, slo * 3) for i in range(20)]
    reqs += [_served(80 + i, 50 + i * 0.5, 0.0, error="refused: slo") for i in range(20)]
    reqs += [_served(100 + i, 100 + i, slo / 2) for i in range(60)]
    records = [_record(0.0, 0.78), _record(50.0, None), _record(100.0, 0.9)]
    first, second = plan_agreement(records, reqs, dict(DEFAULT_CLASSES))
    assert first["simulated_admitted"] == pytest.approx(0.75)
    assert first["simulated_all"] == pytest.approx(0.6)
    assert first["refused_share"] == pytest.approx(0.2)
    assert first["gap_points"] == pytest.approx(3.0) and not first["disagrees"]
    assert second["simulated_admitted"] == 1.0
    assert second["gap_points"] == pytest.approx(-10.0) and second["disagrees"]


def test_a_plan_that_served_too_few_requests_is_not_compared() -> None:
    reqs = [_served(i, float(i), 0.1) for i in range(10)]
    assert plan_agreement([_record(0.0, 1.0)], reqs, dict(DEFAULT_CLASSES)) == []


def test_the_replica_breakdown_says_where_traffic_went_and_which_term_missed() -> None:
    slo = DEFAULT_CLASSES["interactive"].ttft_slo_s
    # replica 0: 60 requests over ~60 s, all in time; replica 1: 60, half past the TTFT SLO
    reqs = [_served(i, float(i), slo / 2) for i in range(60)]
    reqs += [_served(60 + i, float(i), slo * (3 if i % 2 else 0.5)) for i in range(60)]
    for r in reqs[60:]:
        r.replica = 1
    for r in reqs[:60]:
        r.replica = 0
    rows = replica_breakdown([_record(0.0, 0.9)], reqs, dict(DEFAULT_CLASSES))
    assert [b["replica"] for b in rows] == [0, 1]
    assert rows[0]["met"] == 1.0 and rows[0]["ttft_missed"] == 0.0
    assert rows[1]["met"] == pytest.approx(0.5) and rows[1]["ttft_missed"] == pytest.approx(0.5)
    assert rows[1]["tpot_missed"] == 0.0
    assert rows[0]["rps"] == pytest.approx(60 / 59)
    assert rows[1]["prompt_tokens"] == 1000.0 and rows[1]["output_tokens"] == 10.0


def test_each_plan_at_its_planned_load_is_judged_on_its_own_window_with_only_it_installed() -> None:
    slo = DEFAULT_CLASSES["interactive"].ttft_slo_s
    # the first plan is judged on the head (all of it); the second, solved at 100 s over a
    # 50-s window, on [50, 100) of the run with only the second plan installed
    head = [_served(i, float(i), slo / 2) for i in range(50)]
    head += [_served(50 + i, float(i), slo * 3) for i in range(50)]
    report = [_served(i, float(i), slo * 3) for i in range(50)]  # [0, 50): all missed
    report += [_served(50 + i, 50 + i * 0.5, slo / 2) for i in range(100)]  # [50, 100): met
    report += [_served(150 + i, 100 + i, slo * 3) for i in range(60)]  # after: missed
    calls: list[tuple[float, bool]] = []

    def simulate(rec: SolveRecord, on_head: bool) -> tuple[list[Request], dict[str, Any]]:
        calls.append((rec.at_s, on_head))
        return (head if on_head else report), dict(DEFAULT_CLASSES)

    records = [_record(0.0, 0.6), _record(60.0, None), _record(100.0, 0.9)]
    first, second = at_planned_load(records, 50.0, simulate)
    assert calls == [(0.0, True), (100.0, False)]  # the plan that kept none is not simulated
    assert first["simulated_admitted"] == pytest.approx(0.5) and first["requests"] == 100
    assert first["gap_points"] == pytest.approx(10.0) and first["disagrees"]
    assert second["simulated_admitted"] == 1.0 and second["requests"] == 100
    assert second["gap_points"] == pytest.approx(-10.0) and second["disagrees"]


def test_the_off_plan_share_is_the_traffic_routed_away_from_the_plans_split() -> None:
    # plan 1 (from 0 s) splits 1:1 over replicas 0 and 1, the route path sends 3:1;
    # plan 2 (from 100 s) sends all to replica 2, and so does the route path
    reqs = [_served(i, i * 0.5, 0.1) for i in range(80)]
    for i, r in enumerate(reqs):
        r.replica = 0 if i % 4 else 1
    reqs += [_served(80 + i, 100 + i, 0.1) for i in range(60)]
    for r in reqs[80:]:
        r.replica = 2
    reqs.append(_served(200, 10.0, 0.0, error="refused: slo"))  # refused: not counted
    records = [_record(0.0, 0.9), dataclasses.replace(_record(100.0, 0.9), version=2)]
    split = {1: [5.0, 5.0, 0.0], 2: [0.0, 0.0, 3.0]}
    assert off_plan_share(records, reqs, split) == [
        (1, pytest.approx(0.25)),
        (2, pytest.approx(0.0)),
    ]
