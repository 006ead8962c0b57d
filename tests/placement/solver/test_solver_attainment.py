"""Predicted attainment from queueing: falls as the planned load rises, 1 with no load worth
waiting for, 0 when the prefill alone misses the SLO, and shed traffic is not counted as missed."""

from __future__ import annotations

import itertools

import numpy as np

from placement.solver.attainment import (
    ReplicaLoad,
    _cost_model,
    meet_probability,
    wait_exceeds,
)


def _load(rate: float, prompt: float = 1000.0, ttft: float = 2.0, cap: float = 10.0) -> ReplicaLoad:
    one = np.ones(1)
    return ReplicaLoad(
        rate=rate * one,
        prompt=prompt * one,
        output=200.0 * one,
        ttft_slo=ttft * one,
        tpot_slo=0.1 * one,
        capacity=cap * one,
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


def test_wait_tail_limits() -> None:
    x = np.asarray([-1.0, 0.0, 1.0, 100.0])
    tail = wait_exceeds(0.5, 0.2, x)
    assert tail[0] == 1.0 and abs(tail[1] - 0.5) < 1e-12  # P(wait > 0) = ρ
    assert tail[2] < tail[1] and tail[3] < 1e-9
    assert wait_exceeds(0.0, 0.0, x)[2] == 0.0
