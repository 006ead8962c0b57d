"""``health-filter`` against a table of replica states and parameters."""

from __future__ import annotations

import math
from typing import Any

import pytest
from route_builders import NOW, states

from placement.errors import InputError
from serving.route.plugins.filters.health_filter import HealthFilter
from serving.route.plugins.params import Params
from serving.route.types import ReplicaState


def _state(**fields: object) -> ReplicaState:
    s = states(1)[0]
    for k, v in fields.items():
        setattr(s, k, v)
    return s


@pytest.mark.parametrize(
    ("fields", "admits"),
    [
        ({}, True),
        ({"healthy": False}, False),
        # health alone decides: load and staleness are other filters' business
        ({"in_flight": 10_000, "num_requests_waiting": 500.0}, True),
        ({"scraped_at": -1.0}, True),
        ({"healthy": False, "scraped_at": NOW}, False),
    ],
)
def test_health_filter(fields: dict[str, object], admits: bool) -> None:
    assert HealthFilter().admits(_state(**fields), math.inf, NOW) is admits


@pytest.mark.parametrize("cap", [0.0, 1.0, math.inf])
def test_health_filter_ignores_the_cap(cap: float) -> None:
    assert HealthFilter().admits(_state(), cap, NOW) is True
    assert HealthFilter().admits(_state(healthy=False), cap, NOW) is False


def test_health_filter_labels() -> None:
    assert (HealthFilter.name, HealthFilter.cause, HealthFilter.signals) == (
        "health-filter",
        "unhealthy",
        ("healthy",),
    )


def test_health_filter_from_no_params() -> None:
    assert isinstance(
        HealthFilter.from_params(Params({}, source="test.yaml", field="plugin")), HealthFilter
    )


@pytest.mark.parametrize("raw", [{"strict": True}, {"staleness_limit_s": 5.0}])
def test_health_filter_refuses_any_param(raw: dict[str, Any]) -> None:
    (name,) = raw
    with pytest.raises(InputError, match="unknown parameter") as err:
        HealthFilter.from_params(Params(raw, source="test.yaml", field="plugin"))
    assert err.value.field == f"plugin.{name}"
    assert name in str(err.value)
