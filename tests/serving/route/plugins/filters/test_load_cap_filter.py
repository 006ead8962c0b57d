"""``load-cap-filter`` against a table of loads, caps and parameters."""

from __future__ import annotations

import math
from typing import Any

import pytest
from route_builders import NOW, states

from placement.errors import InputError
from placement.plan import ReplicaPlan
from serving.route.plugins.filters.load_cap_filter import (
    DEFAULT_MAX_WAITING,
    DEFAULT_MIN_IN_FLIGHT,
    DEFAULT_RESIDENCE_S,
    LoadCapFilter,
)
from serving.route.plugins.params import Params
from serving.route.types import ReplicaState


def _state(**fields: object) -> ReplicaState:
    s = states(1)[0]
    for k, v in fields.items():
        setattr(s, k, v)
    return s


def _replica(rate: float) -> ReplicaPlan:
    return ReplicaPlan(
        id="r0",
        kind="k",
        accelerator="H100-SXM",
        model="m",
        load_cap_rps=rate,
        planned_rps=0.0,
        kv_budget_tokens=0,
        warm_prefix_tokens=0,
    )


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
    assert LoadCapFilter(residence_s=2.0, min_in_flight=4).cap_of(_replica(rate)) == cap


@pytest.mark.parametrize(
    ("rate", "cap"),
    [
        (0.0, float(DEFAULT_MIN_IN_FLIGHT)),
        (0.4, float(DEFAULT_MIN_IN_FLIGHT)),  # ceil(3.2) = 4
        (0.6, 5.0),  # ceil(4.8)
        (1.0, 8.0),
    ],
)
def test_load_cap_rule_defaults(rate: float, cap: float) -> None:
    assert LoadCapFilter().cap_of(_replica(rate)) == cap


def test_load_cap_filter_labels() -> None:
    assert (LoadCapFilter.name, LoadCapFilter.cause) == ("load-cap-filter", "over-cap")
    assert LoadCapFilter.signals == ("in_flight", "num_requests_waiting", "plan.load_cap_rps")


@pytest.mark.parametrize(
    ("raw", "residence_s", "min_in_flight", "max_waiting"),
    [
        ({}, DEFAULT_RESIDENCE_S, DEFAULT_MIN_IN_FLIGHT, DEFAULT_MAX_WAITING),
        ({"residence_s": 2}, 2.0, DEFAULT_MIN_IN_FLIGHT, DEFAULT_MAX_WAITING),
        ({"min_in_flight": 1, "max_waiting": 0}, DEFAULT_RESIDENCE_S, 1, 0.0),
        ({"residence_s": 0.5, "min_in_flight": 2, "max_waiting": 3.5}, 0.5, 2, 3.5),
    ],
)
def test_load_cap_filter_from_params(
    raw: dict[str, Any],
    residence_s: float,
    min_in_flight: int,
    max_waiting: float,
) -> None:
    f = LoadCapFilter.from_params(Params(raw, source="test.yaml", field="plugin"))
    assert (f.residence_s, f.min_in_flight, f.max_waiting) == (
        residence_s,
        min_in_flight,
        max_waiting,
    )


@pytest.mark.parametrize(
    ("raw", "field", "message"),
    [
        ({"residence_s": 0}, "residence_s", "got 0"),
        ({"residence_s": "8s"}, "residence_s", "got '8s'"),
        ({"min_in_flight": 0}, "min_in_flight", "got 0"),
        ({"min_in_flight": 2.5}, "min_in_flight", "got 2.5"),
        ({"max_waiting": -1}, "max_waiting", "got -1"),
        ({"max_queue": 4}, "max_queue", "unknown parameter"),
    ],
)
def test_load_cap_filter_refuses_bad_params(raw: dict[str, Any], field: str, message: str) -> None:
    with pytest.raises(InputError, match=message) as err:
        LoadCapFilter.from_params(Params(raw, source="test.yaml", field="plugin"))
    assert err.value.field == f"plugin.{field}"
    assert field in str(err.value)
