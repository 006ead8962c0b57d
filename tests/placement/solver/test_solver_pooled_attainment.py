"""Pooled predicted attainment: a pool of replicas waits as one multi-server queue — Erlang C
against the M/M/c closed form, a pool of two beats two queues at half the rate each, a pool
of one is the per-replica model, and the plan's uneven split no longer decides the wait."""

from __future__ import annotations

import math

import numpy as np
import pytest

from placement.domain.fleet import fleet_from_dict
from placement.domain.requests import Request
from placement.solver import FixedCapacity, SolveOptions, build_instance, solve_plan
from placement.solver.attainment import erlang_c, predicted_meet, ttft_meet
from placement.solver.instance import Instance
from placement.solver.pooled_attainment import attainment_for, pool_key, pooled_meet


def _erlang_c_closed_form(c: int, a: float) -> float:
    top = a**c / math.factorial(c) * c / (c - a)
    return top / (sum(a**k / math.factorial(k) for k in range(c)) + top)


@pytest.mark.parametrize(("c", "a"), [(1, 0.7), (2, 1.0), (4, 3.2), (10, 8.0), (32, 30.0)])
def test_erlang_c_is_the_mmc_closed_form(c: int, a: float) -> None:
    assert erlang_c(c, a) == pytest.approx(_erlang_c_closed_form(c, a), rel=1e-9)
    assert erlang_c(2, 1.0) == pytest.approx(1.0 / 3.0)


def test_the_wait_on_c_servers_is_mmc_with_exponential_service() -> None:
    # exponential service (squared CV 1) and Poisson arrivals: P(W > x) = C·exp(−c·μ(1−ρ)·x)
    c, m, rho = 4, 0.5, 0.8
    lam = c * rho / m
    for x in (0.0, 0.2, 1.0, 3.0):
        got = ttft_meet(
            np.asarray([lam]), np.asarray([m]), np.ones(1), np.full((1, 3), x), None, 0.0, c
        )
        want = 1.0 - erlang_c(c, c * rho) * math.exp(-c / m * (1 - rho) * x)
        assert float(got[0]) == pytest.approx(want, rel=1e-9)


def test_a_pool_of_two_beats_two_queues_at_half_the_rate() -> None:
    m, slack = 0.2, np.full((1, 3), 0.3)
    for lam in (2.0, 4.0, 8.0, 9.5):  # per replica: utilisation 0.4 … 0.95
        apart = float(ttft_meet(np.asarray([lam]), np.asarray([m]), np.zeros(1), slack)[0])
        pooled = float(
            ttft_meet(np.asarray([2 * lam]), np.asarray([m]), np.zeros(1), slack, servers=2)[0]
        )
        assert pooled > apart
    # and a pool of one is the single queue
    one = ttft_meet(np.asarray([4.0]), np.asarray([m]), np.zeros(1), slack, servers=1)
    assert float(one[0]) == float(
        ttft_meet(np.asarray([4.0]), np.asarray([m]), np.zeros(1), slack)[0]
    )


def _instance(times: list[float], replicas: int, models: int = 1) -> Instance:
    names = ["llama-3-8b", "mistral-7b"][:models]
    fleet = fleet_from_dict(
        {
            "name": "t",
            "replicas": [
                {"kind": f"h100-{m}", "accelerator": "H100-SXM", "count": replicas, "model": m}
                for m in names
            ],
        }
    )
    reqs = [
        Request(i, t, 3000, 100, tenant="a", model=names[i % models]) for i, t in enumerate(times)
    ]
    return build_instance(
        fleet, reqs, {}, window_s=20.0, capacity=FixedCapacity({"H100-SXM": 10.0})
    )


def _split(inst: Instance, weights: list[float]) -> tuple[list[np.ndarray], ...]:
    n = len(weights)
    units = [np.zeros(n, dtype=np.int64)]
    reps = [np.arange(n, dtype=np.int64)]
    rate = [inst.unit_rate[0] * np.asarray(weights)]
    return units, reps, rate, [np.zeros(n, dtype=np.bool_)]


def test_a_pool_of_one_replica_is_the_per_replica_model() -> None:
    inst = _instance([20.0 * i / 160 for i in range(160)], replicas=1)
    pairs = _split(inst, [1.0])
    assert pooled_meet(inst, *pairs)[0] == pytest.approx(predicted_meet(inst, *pairs)[0], abs=1e-12)


def test_an_uneven_split_waits_as_the_pool_not_as_its_busiest_replica() -> None:
    # 16 req/s of 3k-token prompts over two H100s: split 9:1 the per-replica model queues the
    # first one past its capacity; the route path's pool has room for all of it
    inst = _instance([20.0 * i / 320 for i in range(320)], replicas=2)
    packed = _split(inst, [0.9, 0.1])
    even = _split(inst, [0.5, 0.5])
    apart = predicted_meet(inst, *packed)[0]
    pooled = pooled_meet(inst, *packed)[0]
    assert float(apart[0]) < 0.5
    assert float(pooled[0]) > float(apart[0]) + 0.3
    # the even split: two equal servers, pooled at least as good as each on its own
    assert float(pooled_meet(inst, *even)[0][0]) >= float(predicted_meet(inst, *even)[0][0])


def test_replicas_of_other_models_are_other_pools() -> None:
    inst = _instance([20.0 * i / 80 for i in range(80)], replicas=1, models=2)
    assert pool_key(inst, 0) != pool_key(inst, 1)
    # each model's unit alone on its replica: the same as the per-replica model
    units = [np.asarray([0]), np.asarray([1])]
    reps = [np.asarray([0]), np.asarray([1])]
    rate = [inst.unit_rate[:1].copy(), inst.unit_rate[1:].copy()]
    warm = [np.zeros(1, dtype=np.bool_)] * 2
    for a, b in zip(
        pooled_meet(inst, units, reps, rate, warm),
        predicted_meet(inst, units, reps, rate, warm),
        strict=True,
    ):
        assert a == pytest.approx(b, abs=1e-12)


def test_the_option_changes_the_reported_prediction_not_the_plan() -> None:
    inst = _instance([20.0 * i / 320 for i in range(320)], replicas=3)
    apart = solve_plan(inst, created_at=0.0)
    pooled = solve_plan(inst, created_at=0.0, options=SolveOptions(attainment="pooled"))
    assert apart.replicas == pooled.replicas and apart.defaults == pooled.defaults
    assert [t.admitted_rps for t in apart.tenants] == [t.admitted_rps for t in pooled.tenants]
    got = [t.predicted_attainment for t in pooled.tenants]
    assert all(p is not None and 0.0 <= p <= 1.0 for p in got)


def test_the_model_follows_the_route_profiles_plan_picker() -> None:
    from placement.paths import repo_root
    from serving.route import load_profile

    assert attainment_for("scored") == "pooled"
    assert {attainment_for(p) for p in ("weighted", "warm", "planned")} == {"replica"}
    profiles = repo_root() / "data" / "profiles"
    # the loop's profile scores over the fleet; the default one looks the plan's split up
    assert attainment_for(load_profile(profiles / "scored.yaml").plan_picker) == "pooled"
    assert attainment_for(load_profile(profiles / "default.yaml").plan_picker) == "replica"
