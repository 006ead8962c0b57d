"""``kv-usage-scorer``: grade = 1 − scraped KV cache usage, clamped to [0, 1]."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from route_builders import states

from placement.errors import InputError
from serving.route.plugins import SCORERS
from serving.route.plugins.base import FallbackContext
from serving.route.plugins.params import Params
from serving.route.plugins.scorers.kv_usage_scorer import KvUsageScorer

MakeContext = Callable[..., FallbackContext]


@pytest.mark.parametrize(
    ("usage", "candidates", "grades"),
    [
        ([0.0, 0.25, 0.5, 1.0], [0, 1, 2, 3], [1.0, 0.75, 0.5, 0.0]),
        # grades follow the candidates' order, and only the candidates are graded
        ([0.0, 0.25, 0.5, 1.0], [3, 1], [0.0, 0.75]),
        # an absolute grade, not min-max: equally full replicas all grade low
        ([0.9, 0.9, 0.9, 0.9], [0, 1, 2, 3], [0.1, 0.1, 0.1, 0.1]),
        ([0.6, 0.2, 0.2, 0.6], [0, 1, 2, 3], [0.4, 0.8, 0.8, 0.4]),
        # out-of-range scrapes are clamped into [0, 1]
        ([1.3, -0.2, 0.5, 0.5], [0, 1, 2, 3], [0.0, 1.0, 0.5, 0.5]),
        ([0.3, 0.0, 0.0, 0.0], [0], [0.7]),
        ([0.3, 0.0, 0.0, 0.0], [], []),
    ],
)
def test_kv_usage_grades(
    make_ctx: MakeContext, usage: list[float], candidates: list[int], grades: list[float]
) -> None:
    fleet = states(len(usage))
    for s, u in zip(fleet, usage, strict=True):
        s.kv_cache_usage_perc = u
    got = KvUsageScorer().score(make_ctx(fleet), candidates)
    assert got == pytest.approx(grades)
    assert all(0.0 <= g <= 1.0 for g in got)


@pytest.mark.parametrize(
    ("usage", "best"),
    [
        ([0.8, 0.1, 0.5], 1),
        ([0.0, 0.9, 0.95], 0),
        ([0.99, 0.98, 0.97], 2),
    ],
)
def test_least_used_grades_best(make_ctx: MakeContext, usage: list[float], best: int) -> None:
    fleet = states(len(usage))
    for s, u in zip(fleet, usage, strict=True):
        s.kv_cache_usage_perc = u
    got = KvUsageScorer().score(make_ctx(fleet), list(range(len(usage))))
    assert max(range(len(got)), key=got.__getitem__) == best


@pytest.mark.parametrize(
    "fields",
    [
        {"in_flight": 50},
        {"num_requests_waiting": 20.0},
        {"in_flight_prefill_tokens": 100_000},
    ],
)
def test_reads_kv_usage_only(make_ctx: MakeContext, fields: dict[str, Any]) -> None:
    fleet = states(2)
    for k, v in fields.items():
        setattr(fleet[0], k, v)
    assert KvUsageScorer().score(make_ctx(fleet), [0, 1]) == [1.0, 1.0]


def test_kv_usage_scorer_labels() -> None:
    assert KvUsageScorer.name == "kv-usage-scorer"
    assert KvUsageScorer.signals == ("kv_cache_usage_perc",)
    assert SCORERS["kv-usage-scorer"] == KvUsageScorer.from_params


def test_kv_usage_scorer_from_no_params() -> None:
    made = KvUsageScorer.from_params(Params({}, source="test.yaml", field="scorers[0]"))
    assert isinstance(made, KvUsageScorer)


@pytest.mark.parametrize("name", ["weight_kv", "threshold"])
def test_kv_usage_scorer_refuses_unknown_param(name: str) -> None:
    with pytest.raises(InputError, match="unknown parameter") as err:
        KvUsageScorer.from_params(Params({name: 1.0}, source="test.yaml", field="scorers[0]"))
    assert err.value.field == f"scorers[0].{name}"
    assert name in str(err.value) and "test.yaml" in str(err.value)
