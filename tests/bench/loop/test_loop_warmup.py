from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

import pytest

from bench.loop import run
from bench.loop.cases import build_cases
from bench.loop.tuning import Setting
from bench.loop.warmup import check_warm_up, warm_run, warm_up_requests
from placement.domain.requests import Request
from placement.errors import InputError
from sim.metrics import summarise
from sim.simulator import SimResult
from sim.workloads.base import Workload
from tests.bench.loop.test_loop_run import MIXED_CASE


def _workload(arrivals: list[float], first_id: int = 0) -> Workload:
    reqs = [
        Request(id=first_id + i, arrival_s=a, input_tokens=100, output_tokens=10)
        for i, a in enumerate(arrivals)
    ]
    return Workload(name="w", requests=reqs, tenants={})


def test_the_warm_up_is_the_heads_last_seconds_at_the_rate_ending_where_the_tail_starts() -> None:
    head = _workload([0.0, 10.0, 50.0, 70.0, 95.0])  # a head of 100 trace-seconds
    # 10 simulated seconds at rate 4: the head's last 40 trace-seconds, timed to end at 10 s
    warm = warm_up_requests(head, 100.0, 10.0, 4.0)
    assert [r.id for r in warm] == [3, 4]
    assert [r.arrival_s for r in warm] == pytest.approx([2.5, 8.75])
    assert all(r.replica == -1 and not r.error for r in warm)  # fresh, unserved
    assert warm_up_requests(head, 100.0, 0.0, 4.0) == []
    assert len(warm_up_requests(head, 100.0, 1e6, 4.0)) == 5  # at most the whole head


def _served(wl: Workload) -> SimResult:
    """A stand-in simulation: every request served, in order, by replica 0."""
    for r in wl.requests:
        r.replica, r.first_token_s, r.finish_s = 0, r.arrival_s + 0.1, r.arrival_s + 0.5
    return SimResult(
        policy="p",
        workload=wl.name,
        fleet=None,  # type: ignore[arg-type]
        requests=wl.requests,
        replicas=[],
        end_s=wl.requests[-1].arrival_s + 0.5,
        wall_s=0.0,
        events=0,
        refused=7,
        retries=0,
    )


def test_no_warm_up_runs_the_tail_as_it_was() -> None:
    tail = _workload([0.0, 1.0], first_id=10)
    seen: list[Workload] = []
    result, counted = warm_run(lambda wl: seen.append(wl) or _served(wl), tail, [], 0.0)
    assert seen == [tail] and counted is tail and result.requests is tail.requests
    assert result.refused == 7  # the simulator's own count, untouched


def test_a_warm_run_counts_the_tails_requests_only_after_the_warm_up() -> None:
    tail = _workload([0.0, 1.0, 3.0], first_id=10)
    warm = warm_up_requests(_workload([0.0, 90.0, 99.0]), 100.0, 5.0, 4.0)
    seen: list[Workload] = []
    result, counted = warm_run(lambda wl: seen.append(wl) or _served(wl), tail, warm, 5.0)
    (joined,) = seen  # one run: the same policy serves the warm-up and the tail
    assert [r.id for r in joined.requests] == [1, 2, 10, 11, 12]
    assert all(r.replica == 0 for r in joined.requests)
    assert [r.id for r in result.requests] == [r.id for r in counted.requests] == [10, 11, 12]
    assert [r.arrival_s for r in counted.requests] == [5.0, 6.0, 8.0]
    assert max(r.arrival_s for r in warm) < min(r.arrival_s for r in counted.requests)
    assert result.refused == 0  # over the tail's requests
    assert tail.requests[0].replica == -1  # the tail itself is left unserved


@pytest.mark.parametrize("bad", [-1.0, math.nan, math.inf])
def test_a_bad_warm_up_is_refused_naming_its_field(bad: float) -> None:
    with pytest.raises(InputError, match="--warm-up-s"):
        check_warm_up(bad)
    with pytest.raises(InputError, match="--warm-up-s"):
        build_cases(**_CASE, warm_up_s=bad)
    (case,) = build_cases(**_CASE)
    with pytest.raises(InputError, match="warm_up_s"):
        dataclasses.replace(case, warm_up_s=bad)


# the loop tests' short case over h100x8, on ``synthetic`` at load 2
_CASE: dict[str, Any] = MIXED_CASE | {"workloads": "synthetic", "loads": (2.0,)}


def _ctx(warm_up_s: float) -> run.CaseContext:
    """An untuned context of a short synthetic case with ``warm_up_s``."""
    from bench.loop.learn import roofline_capacity
    from placement.solver.capacity import class_slos

    (case,) = build_cases(**_CASE, warm_up_s=warm_up_s)
    tune, report = case.workload.split(case.tune_share)
    return run.CaseContext(
        case=case,
        tune=tune,
        report=report,
        weights=[4.0] * len(case.fleet.replicas),
        capacity=roofline_capacity(class_slos(tune.classes)),
        model_uri="roofline-prior",
    )


def test_every_reported_run_sees_the_warm_up_and_counts_the_tail_alone() -> None:
    """With 0 the loop's runs are the tail's as before; with a warm-up, ours, the peers, the
    shadow gate and the head tuning's runs each count exactly what they did."""
    cold, warm = _ctx(0.0), _ctx(5.0)
    tail_ids = [r.id for r in cold.report.requests]
    rate = run.rate_multiplier(2.0, cold.report, cold.nominal_rps)
    before = warm_up_requests(warm.tune, warm.head_span_s, 5.0, rate)
    assert before and all(r.id not in set(tail_ids) for r in before)
    for ctx, shift in ((cold, 0.0), (warm, 5.0)):
        ran = [
            run.peer(ctx, "round_robin", 2.0),
            run.ours(ctx, 2.0)[:2],
            run.ours(ctx, 2.0, run.SHADOW_GATE)[:2],
        ]
        for result, wl in ran:
            assert [r.id for r in result.requests] == [r.id for r in wl.requests] == tail_ids
            assert wl.requests[0].arrival_s == pytest.approx(
                cold.report.requests[0].arrival_s / rate + shift
            )
            assert all(r.replica >= 0 or r.error for r in result.requests)
        head, wl, _ = run.ours(ctx, 2.0, on=ctx.tune)  # head runs: never warmed
        assert len(head.requests) == len(ctx.tune)
    # no warm-up: the very figures of a run of the tail alone
    result, wl = run.peer(cold, "round_robin", 2.0)
    alone, _ = run._simulate(
        cold,
        run.make_policy("round_robin", run.PolicyContext(seed=0, block_tokens=wl.block_tokens)),
        cold.report.scaled(rate),
    )
    assert summarise(result, wl).as_row() | {"wall_s": 0} == summarise(alone, wl).as_row() | {
        "wall_s": 0
    }


def test_a_small_case_runs_end_to_end_on_a_warm_fleet(tmp_path: Path) -> None:
    """Every figure of a case with a warm-up: counted over the tail's requests (the fluid
    bound too), the faults striking at the same point of the tail's clock."""
    from bench.loop.report import run_loop_bench

    (case,) = build_cases(**{**_CASE, "loads": (1.0, 3.0)}, warm_up_s=3.0)
    case = dataclasses.replace(case, settings=(Setting(1.0, 2.0, 1.0),))
    payload = run_loop_bench([case], out=tmp_path / "loop.json", store=tmp_path / "store")
    (summary,) = payload["summary"]
    assert summary["warm_up_s"] == 3.0
    tail = summary["requests_reported"]
    swept = [r for r in payload["runs"] if "@" not in str(r["policy"])]
    assert swept and all(r["requests"] == tail for r in swept)
    ours = [r for r in payload["runs"] if r["policy"] == "placement"]
    assert all(r["share_of_bound"] > 0 for r in ours)
    report = case.workload.split(case.tune_share)[1]
    rate = run.rate_multiplier(case.failure_load, report, summary["nominal_capacity_rps"])
    # in the tail's clock: 40% of its span at the failure load, as without a warm-up
    assert summary["failures"]["at_s"] == pytest.approx(0.4 * report.scaled(rate).duration_s)
    assert summary["failures"]["ours"]["attainment_before"] is not None
