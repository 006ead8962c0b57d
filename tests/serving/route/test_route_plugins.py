"""Each plugin against a table of cases."""

from __future__ import annotations

import math

import pytest
from route_builders import NOW, states

from placement.domain.scoring import lower_is_better
from placement.plan import ReplicaPlan
from serving.route.plugins.filters.freshness_filter import FreshnessFilter
from serving.route.plugins.filters.health_filter import HealthFilter
from serving.route.plugins.filters.load_cap_filter import LoadCapFilter
from serving.route.types import ReplicaState


def _state(**fields: object) -> ReplicaState:
    s = states(1)[0]
    for k, v in fields.items():
        setattr(s, k, v)
    return s


@pytest.mark.parametrize(
    ("fields", "admits"),
    [({}, True), ({"healthy": False}, False)],
)
def test_health_filter(fields: dict[str, object], admits: bool) -> None:
    assert HealthFilter().admits(_state(**fields), math.inf, NOW) is admits


@pytest.mark.parametrize(
    ("scraped_at", "admits"),
    [(NOW, True), (NOW - 2.0, True), (NOW - 2.01, False), (-1.0, False)],
)
def test_freshness_filter(scraped_at: float, admits: bool) -> None:
    assert FreshnessFilter(2.0).admits(_state(scraped_at=scraped_at), math.inf, NOW) is admits


@pytest.mark.parametrize(
    ("in_flight", "waiting", "cap", "admits"),
    [
        (0, 0.0, 3.0, True),
        (2, 0.0, 3.0, True),
        (3, 0.0, 3.0, False),
        (0, 5.0, math.inf, True),
        (0, 5.1, math.inf, False),
    ],
)
def test_load_cap_filter(in_flight: int, waiting: float, cap: float, admits: bool) -> None:
    f = LoadCapFilter(residence_s=2.0, min_in_flight=1, max_waiting=5.0)
    state = _state(in_flight=in_flight, num_requests_waiting=waiting)
    assert f.admits(state, cap, NOW) is admits


@pytest.mark.parametrize(("rate", "cap"), [(0.0, 4.0), (1.0, 4.0), (2.5, 5.0), (10.0, 20.0)])
def test_load_cap_rule(rate: float, cap: float) -> None:
    rp = ReplicaPlan(
        id="r0",
        kind="k",
        accelerator="H100-SXM",
        model="m",
        load_cap_rps=rate,
        planned_rps=0.0,
        kv_budget_tokens=0,
        warm_prefix_tokens=0,
    )
    assert LoadCapFilter(residence_s=2.0, min_in_flight=4).cap_of(rp) == cap


@pytest.mark.parametrize(
    ("values", "grades"),
    [([1.0, 1.0], [1.0, 1.0]), ([0.0, 5.0, 10.0], [1.0, 0.5, 0.0])],
)
def test_lower_is_better(values: list[float], grades: list[float]) -> None:
    assert lower_is_better(values) == grades
