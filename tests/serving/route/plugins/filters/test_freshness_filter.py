"""``freshness-filter`` against a table of scrape times and parameters."""

from __future__ import annotations

import math
from typing import Any

import pytest
from route_builders import NOW, states

from placement.errors import InputError
from serving.route.plugins.filters.freshness_filter import (
    DEFAULT_STALENESS_LIMIT_S,
    FreshnessFilter,
)
from serving.route.plugins.params import Params
from serving.route.types import ReplicaState


def _state(**fields: object) -> ReplicaState:
    s = states(1)[0]
    for k, v in fields.items():
        setattr(s, k, v)
    return s


@pytest.mark.parametrize(
    ("scraped_at", "admits"),
    [(NOW, True), (NOW - 2.0, True), (NOW - 2.01, False), (-1.0, False)],
)
def test_freshness_filter(scraped_at: float, admits: bool) -> None:
    assert FreshnessFilter(2.0).admits(_state(scraped_at=scraped_at), math.inf, NOW) is admits


@pytest.mark.parametrize(
    ("fields", "admits"),
    [
        ({"scraped_at": NOW - DEFAULT_STALENESS_LIMIT_S}, True),
        ({"scraped_at": NOW - DEFAULT_STALENESS_LIMIT_S - 0.01}, False),
        # never scraped is stale even when "now" is close to zero
        ({"scraped_at": -1.0}, False),
        # freshness alone decides: an unhealthy or loaded replica with fresh metrics passes
        ({"healthy": False}, True),
        ({"in_flight": 10_000}, True),
    ],
)
def test_freshness_filter_default_limit(fields: dict[str, object], admits: bool) -> None:
    assert FreshnessFilter().admits(_state(**fields), math.inf, NOW) is admits


def test_never_scraped_is_stale_at_time_zero() -> None:
    assert FreshnessFilter(5.0).admits(_state(scraped_at=-1.0), math.inf, 0.0) is False


def test_freshness_filter_labels() -> None:
    assert (FreshnessFilter.name, FreshnessFilter.cause, FreshnessFilter.signals) == (
        "freshness-filter",
        "stale",
        ("scraped_at",),
    )


@pytest.mark.parametrize(
    ("raw", "limit"),
    [
        ({}, DEFAULT_STALENESS_LIMIT_S),
        ({"staleness_limit_s": 2}, 2.0),
        ({"staleness_limit_s": 0.5}, 0.5),
    ],
)
def test_freshness_filter_from_params(raw: dict[str, Any], limit: float) -> None:
    f = FreshnessFilter.from_params(Params(raw, source="test.yaml", field="plugin"))
    assert f.staleness_limit_s == limit
    assert f.admits(_state(scraped_at=NOW - limit), math.inf, NOW) is True
    assert f.admits(_state(scraped_at=NOW - limit - 0.01), math.inf, NOW) is False


@pytest.mark.parametrize(
    ("raw", "field", "message"),
    [
        ({"staleness_limit_s": 0}, "staleness_limit_s", "got 0"),
        ({"staleness_limit_s": -1.0}, "staleness_limit_s", "got -1.0"),
        ({"staleness_limit_s": "5s"}, "staleness_limit_s", "got '5s'"),
        ({"staleness_limit_s": True}, "staleness_limit_s", "got True"),
        ({"staleness_limit_s": math.inf}, "staleness_limit_s", "got inf"),
        ({"staleness_limit": 5.0}, "staleness_limit", "unknown parameter"),
    ],
)
def test_freshness_filter_refuses_bad_params(raw: dict[str, Any], field: str, message: str) -> None:
    with pytest.raises(InputError, match=message) as err:
        FreshnessFilter.from_params(Params(raw, source="test.yaml", field="plugin"))
    assert err.value.field == f"plugin.{field}"
    assert field in str(err.value)
