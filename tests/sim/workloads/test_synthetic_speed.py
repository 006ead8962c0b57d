"""The synthetic generator at scale: a hundred thousand requests, as many as the rate asks.

(Its speed is a benchmark figure, not a unit test: ``placement bench sim-speed``.)"""

from __future__ import annotations

import pytest

from sim.workloads.synthetic import synthetic_tenants


def test_a_hundred_thousand_requests_at_the_asked_rate() -> None:
    workload = synthetic_tenants(duration_s=100, rate_rps=1000, seed=0)
    assert len(workload) == pytest.approx(100_000, rel=0.05)
    arrivals = [r.arrival_s for r in workload.requests]
    assert arrivals == sorted(arrivals) and arrivals[-1] <= 100.0
