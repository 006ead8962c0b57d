"""The synthetic generator's speed budget: a million requests in under 20 s."""

from __future__ import annotations

import time

import pytest

from sim.workloads.synthetic import synthetic_tenants


@pytest.mark.slow
def test_a_million_requests_in_under_20_s() -> None:
    started = time.perf_counter()
    workload = synthetic_tenants(duration_s=1000, rate_rps=1000, seed=0)
    elapsed = time.perf_counter() - started
    assert len(workload) == pytest.approx(1_000_000, rel=0.05)
    assert elapsed < 20.0
