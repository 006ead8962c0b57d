"""Predicted attainment from queueing: falls as the planned load rises, 1 with no load worth
waiting for, 0 when the prefill alone misses the SLO, and shed traffic is not counted as missed."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from placement.domain.fleet import fleet_from_dict
from placement.domain.requests import Request
from placement.solver import FixedCapacity, build_instance
from placement.solver.attainment import (
    LINEAR_GRID,
    ReplicaLoad,
    _cost_model,
    _linear_table,
    _prefill_table,
    fluid_backlog,
    marginal_share,
    meet_probability,
    predicted_meet,
    wait_exceeds,
)


def _load(
    rate: float,
    prompt: float = 1000.0,
    ttft: float = 2.0,
    cap: float = 10.0,
    prompt_scv: float = 0.0,
) -> ReplicaLoad:
    one = np.ones(1)
    return ReplicaLoad(
        rate=rate * one,
        prompt=prompt * one,
        output=200.0 * one,
        ttft_slo=ttft * one,
        tpot_slo=0.1 * one,
        capacity=cap * one,
        prompt_scv=prompt_scv * one,
    )


def test_engine_model_falls_with_load_and_meets_at_light_load() -> None:
    cost = _cost_model("H100-SXM", "llama-3-8b", 1)
    assert cost is not None
    meets = [float(meet_probability(_load(rate), cost)[0]) for rate in (0.01, 1, 5, 10, 20, 40)]
    assert meets[0] > 0.99
    assert all(a >= b - 1e-12 for a, b in itertools.pairwise(meets))
    assert meets[-1] < 0.5  # far past the replica's capacity


def test_prefill_longer_than_the_slo_never_meets() -> None:
    cost = _cost_model("H100-SXM", "llama-3-8b", 1)
    assert float(meet_probability(_load(0.01, prompt=120_000, ttft=0.05), cost)[0]) == 0.0


def test_fallback_without_cost_model_uses_capacity() -> None:
    assert _cost_model("no-such-accelerator", "llama-3-8b", 1) is None
    meets = [float(meet_probability(_load(rate), None)[0]) for rate in (0.1, 5, 9, 12.5, 20)]
    assert meets[0] > 0.99
    assert all(a >= b - 1e-12 for a, b in itertools.pairwise(meets))
    assert meets[-1] <= 0.5 + 1e-9  # over capacity: at most 1/ρ in time


def test_prefill_stretches_a_decode_step_to_at_most_a_full_iteration() -> None:
    # heavy prefill, TTFT SLO out of reach of any queue: only the TPOT term decides. The
    # engine gives each decode one token of every iteration and prefill the rest of the token
    # budget, so a decode step is never slower than a full-budget iteration: on an H100 (8B,
    # a full iteration ~60 ms) decodes keep their 100 ms SLO near prefill saturation; on an
    # A100 (a full iteration ~160 ms) they do not
    def heavy(rate: float) -> ReplicaLoad:
        one = np.ones(1)
        return ReplicaLoad(
            rate=rate * one,
            prompt=1000.0 * one,
            output=50.0 * one,
            ttft_slo=1000.0 * one,
            tpot_slo=0.1 * one,
            capacity=10.0 * one,
        )

    h100 = _cost_model("H100-SXM", "llama-3-8b", 1)
    a100 = _cost_model("A100-80G", "llama-3-8b", 1)
    assert h100 is not None and a100 is not None
    assert float(meet_probability(heavy(35.0), h100)[0]) > 0.8  # ρ_p ≈ 0.9
    assert float(meet_probability(heavy(20.0), a100)[0]) < 0.05


def test_prefill_beside_decodes_adds_what_the_decodes_do_not_already_pay() -> None:
    # beside 100 running decodes, which already pay the iteration's overhead and the weights'
    # read, a 500-token prompt adds linear(600) − linear(100): on both kinds well under its
    # time alone (overhead + linear(500))
    for acc in ("L40S", "H100-SXM"):
        cost = _cost_model(acc, "llama-3-8b", 1)
        linear = _linear_table(acc, "llama-3-8b", 1)
        assert cost is not None and linear is not None and len(linear) == len(LINEAR_GRID)
        beside = float(marginal_share(cost, linear, 100.0, np.asarray([500.0]))[0])
        expected = (cost.linear_s(600) - cost.linear_s(100)) / (
            cost.overhead_s + cost.linear_s(500)
        )
        assert abs(beside - expected) < 0.03  # the tabulated linear time, interpolated
        assert 0.3 < beside < 0.75


def test_wait_tail_limits() -> None:
    x = np.asarray([-1.0, 0.0, 1.0, 100.0])
    tail = wait_exceeds(0.5, 0.2, x)
    assert tail[0] == 1.0 and abs(tail[1] - 0.5) < 1e-12  # P(wait > 0) = ρ
    assert tail[2] < tail[1] and tail[3] < 1e-9
    assert wait_exceeds(0.0, 0.0, x)[2] == 0.0


def test_fluid_backlog_is_lindleys_recursion() -> None:
    work = np.asarray([0.2, 1.5, 1.5, 0.0, 0.0, 0.9])
    backlog = fluid_backlog(work, 1.0)
    expected, b = [], 0.0
    for w in work:
        expected.append(b)
        b = max(0.0, b + w - 1.0)
    assert np.allclose(backlog, expected)
    assert backlog[0] == 0.0 and backlog[3] == pytest.approx(1.0)


def test_bursts_measured_in_the_arrivals_cost_attainment_the_mean_rate_hides() -> None:
    cost = _cost_model("H100-SXM", "llama-3-8b", 1)
    table = _prefill_table("H100-SXM", "llama-3-8b", 1)
    # the same 4 req/s over 20 s: two per 0.5 s bin, or all 80 in one bin
    steady = np.full((1, 40), 2.0)
    bursty = np.zeros((1, 40))
    bursty[0, 5] = 80.0
    smooth = float(meet_probability(_load(4.0, ttft=0.5), cost, table, steady, 0.5)[0])
    bursts = float(meet_probability(_load(4.0, ttft=0.5), cost, table, bursty, 0.5)[0])
    assert smooth > 0.95
    assert bursts < smooth - 0.2


def test_prompt_spread_inside_a_unit_misses_where_its_mean_would_not() -> None:
    cost = _cost_model("L40S", "llama-3-8b", 1)
    table = _prefill_table("L40S", "llama-3-8b", 1)
    arrivals = np.full((1, 40), 0.1)  # 0.2 req/s, light load: the prefill itself decides
    same = float(meet_probability(_load(0.2, prompt=4000, ttft=0.6), cost, table, arrivals, 0.5)[0])
    spread = float(
        meet_probability(
            _load(0.2, prompt=4000, ttft=0.6, prompt_scv=2.0), cost, table, arrivals, 0.5
        )[0]
    )
    assert same > 0.95
    assert spread < same - 0.1


def _instance(times: list[float]):  # type: ignore[no-untyped-def]
    fleet = fleet_from_dict(
        {
            "name": "t",
            "replicas": [
                {"kind": "h100", "accelerator": "H100-SXM", "count": 1, "model": "llama-3-8b"}
            ],
        }
    )
    reqs = [
        Request(i, t, 3000, 100, tenant="a", model="llama-3-8b", block_hashes=(50_000 + i,))
        for i, t in enumerate(times)
    ]
    cap = FixedCapacity({"H100-SXM": 10.0})
    return build_instance(fleet, reqs, {}, window_s=20.0, capacity=cap)


def test_the_plan_reads_each_units_own_arrivals() -> None:
    # 80 requests over 20 s: evenly, or in one burst; same rate, same mix
    even = _instance([20.0 * i / 80 for i in range(80)])
    burst = _instance([0.0] + [10.0 + 0.005 * i for i in range(78)] + [20.0])
    assert even.unit_arrivals.shape == (1, 40) and even.arrival_bin_s == 0.5
    pair = ([np.zeros(1, dtype=np.int64)], [np.zeros(1, dtype=np.int64)])
    meets = [
        float(predicted_meet(inst, *pair, [inst.unit_rate.copy()], [np.zeros(1, bool)])[0][0])
        for inst in (even, burst)
    ]
    assert meets[0] > 0.95
    assert meets[1] < meets[0] - 0.2


def test_a_replica_carries_its_weight_of_the_traffic_the_plan_sheds() -> None:
    # the route path sends the unit's whole rate by the plan's weights: a plan that admits
    # half of it leaves the replica with all of it, and predicts accordingly
    inst = _instance([20.0 * i / 240 for i in range(240)])  # 12 req/s of 3k-token prompts
    pair = ([np.zeros(1, dtype=np.int64)], [np.zeros(1, dtype=np.int64)])
    cold = [np.zeros(1, bool)]
    whole = float(predicted_meet(inst, *pair, [inst.unit_rate.copy()], cold)[0][0])
    half = float(predicted_meet(inst, *pair, [inst.unit_rate / 2], cold)[0][0])
    assert half == pytest.approx(whole)
    alone = _instance([20.0 * i / 120 for i in range(120)])  # what half the rate would meet
    lighter = float(predicted_meet(alone, *pair, [alone.unit_rate.copy()], cold)[0][0])
    assert lighter > whole + 0.05
