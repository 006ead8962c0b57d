"""The fleet's capacity at SLO for the flow traffic: the highest load at which the service
refusing at once still meets 90% of the feasible interactive requests."""

from __future__ import annotations

import pytest

from bench.flow.capacity import measure_capacity
from bench.flow.run import h100_fleet
from placement.paths import shared_data

pytestmark = pytest.mark.skipif(
    not (shared_data() / "traces/mooncake").exists(), reason="shared data missing"
)


def test_capacity_is_where_the_refusing_service_falls_below_ninety_percent() -> None:
    fleet = h100_fleet(2)
    loads = (0.25, 1.0, 6.0)
    scale, rows = measure_capacity(fleet, end=0.06, seed=3, loads=loads, drain_s=30)
    assert {r["phase"] for r in rows} == {"capacity"}
    assert {r["admission"] for r in rows} == {"gate", "cap"}
    assert all(r["queue"] == "refuse" and r["batch_requests"] == 0 for r in rows)
    gate = {r["load"]: r["slo_attainment"] for r in rows if r["admission"] == "gate"}
    assert gate[0.25] >= 0.9 > gate[6.0]  # the knee lies inside the loads tried
    best = {load: max(r["slo_attainment"] for r in rows if r["load"] == load) for load in loads}
    # interpolated between the last load some refusing service holds and the next
    held = max(load for load in loads if best[load] >= 0.9)
    assert held <= scale < min(load for load in loads if load > held)
    with pytest.raises(ValueError, match="no load"):
        measure_capacity(fleet, end=0.04, seed=3, loads=(40.0,), drain_s=30)
