"""``queue-scorer``: fewer in flight (router's count + scraped waiting) grades higher,
min-max normalised over the candidates."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from route_builders import states

from placement.errors import InputError
from serving.route.plugins import SCORERS
from serving.route.plugins.base import FallbackContext
from serving.route.plugins.params import Params
from serving.route.plugins.scorers.queue_scorer import QueueScorer

MakeContext = Callable[..., FallbackContext]


@pytest.mark.parametrize(
    ("in_flight", "waiting", "candidates", "grades"),
    [
        ([0, 2, 4, 0], [0, 0, 0, 0], [0, 1, 2], [1.0, 0.5, 0.0]),
        # the scraped waiting queue counts as load too
        ([1, 0, 0, 0], [0, 3, 0, 0], [0, 1], [1.0, 0.0]),
        ([0, 0, 0, 0], [0, 1, 4, 0], [2, 1, 0], [0.0, 0.75, 1.0]),
        # own count and scraped queue add up: 2 + 0 ties 0 + 2
        ([2, 0, 1, 0], [0, 2, 0, 0], [0, 1, 2], [0.0, 0.0, 1.0]),
        ([2, 0, 0, 0], [0, 2, 0, 0], [0, 1], [1.0, 1.0]),
        # all equally loaded: all best
        ([5, 5, 5, 5], [0, 0, 0, 0], [0, 1, 2, 3], [1.0, 1.0, 1.0, 1.0]),
        ([9, 0, 0, 0], [0, 0, 0, 0], [0], [1.0]),
        # normalised over the candidates only: r0 (idle) is not one, so r1 grades best
        ([0, 1, 2, 3], [0, 0, 0, 0], [3, 1], [0.0, 1.0]),
    ],
)
def test_queue_grades(
    make_ctx: MakeContext,
    in_flight: list[int],
    waiting: list[float],
    candidates: list[int],
    grades: list[float],
) -> None:
    fleet = states(len(in_flight))
    for s, n, w in zip(fleet, in_flight, waiting, strict=True):
        s.in_flight, s.num_requests_waiting = n, w
    got = QueueScorer().score(make_ctx(fleet), candidates)
    assert got == pytest.approx(grades)
    assert all(0.0 <= g <= 1.0 for g in got)


@pytest.mark.parametrize(
    ("in_flight", "best"),
    [([3, 1, 2], 1), ([0, 7, 7], 0), ([12, 11, 10], 2)],
)
def test_least_loaded_grades_best(make_ctx: MakeContext, in_flight: list[int], best: int) -> None:
    fleet = states(len(in_flight))
    for s, n in zip(fleet, in_flight, strict=True):
        s.in_flight = n
    got = QueueScorer().score(make_ctx(fleet), list(range(len(in_flight))))
    assert got[best] == 1.0
    assert [i for i, g in enumerate(got) if g == 1.0] == [best]


def test_ignores_kv_usage(make_ctx: MakeContext) -> None:
    fleet = states(2)
    fleet[0].kv_cache_usage_perc = 0.99
    fleet[1].in_flight = 1
    assert QueueScorer().score(make_ctx(fleet), [0, 1]) == [1.0, 0.0]


def test_queue_scorer_labels() -> None:
    assert QueueScorer.name == "queue-scorer"
    assert QueueScorer.signals == ("in_flight", "num_requests_waiting")
    assert SCORERS["queue-scorer"] == QueueScorer.from_params


def test_queue_scorer_from_no_params() -> None:
    made = QueueScorer.from_params(Params({}, source="test.yaml", field="scorers[1]"))
    assert isinstance(made, QueueScorer)


@pytest.mark.parametrize("name", ["max_queue", "weight"])
def test_queue_scorer_refuses_unknown_param(name: str) -> None:
    with pytest.raises(InputError, match="unknown parameter") as err:
        QueueScorer.from_params(Params({name: 4}, source="test.yaml", field="scorers[1]"))
    assert err.value.field == f"scorers[1].{name}"
    assert name in str(err.value)
