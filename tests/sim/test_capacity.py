from __future__ import annotations

import pytest

from placement.domain.requests import Request
from sim.capacity import fleet_capacity, prefill_s, rate_for_load
from sim.costmodel.linear import LinearCostModel
from sim.workloads.base import Workload


def test_prefill_time_counts_chunks_and_attention(fleet):
    cost = LinearCostModel(overhead_s=0.01, per_token_s=1e-4, attn_pair_s=1e-8)
    spec = fleet.replicas[0]  # 2048-token chunks
    # chunks 2048 at context 0 and 952 at context 2048
    expected = 2 * 0.01 + 3000 * 1e-4 + 1e-8 * (2048 * 1024 + 952 * (2048 + 476))
    assert prefill_s(spec, cost, 3000) == pytest.approx(expected)


def test_rate_for_load_is_linear_and_long_prompts_cost_more(fleet, cost):
    short = Workload(
        name="s", requests=[Request(i, float(i), 500, 100) for i in range(100)], tenants={}
    )
    long = Workload(
        name="l", requests=[Request(i, float(i), 8000, 100) for i in range(100)], tenants={}
    )
    one = rate_for_load(1.0, fleet, short, lambda s: cost)
    assert rate_for_load(2.0, fleet, short, lambda s: cost) == pytest.approx(2 * one)
    assert sum(fleet_capacity(fleet, long, lambda s: cost)) < sum(
        fleet_capacity(fleet, short, lambda s: cost)
    )
