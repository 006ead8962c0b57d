"""``prefix-match-scorer``: grade = cached tokens / prompt tokens, clamped to [0, 1]."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from route_builders import chain, query, states

from placement.errors import InputError
from serving.route.plugins import SCORERS
from serving.route.plugins.base import FallbackContext
from serving.route.plugins.params import Params
from serving.route.plugins.scorers.prefix_match_scorer import PrefixMatchScorer

MakeContext = Callable[..., FallbackContext]


@pytest.mark.parametrize(
    ("tokens", "cached", "candidates", "grades"),
    [
        (1000, {0: 500, 1: 1000}, [0, 1, 2], [0.5, 1.0, 0.0]),
        (1000, {0: 500, 1: 1000}, [2, 1], [0.0, 1.0]),
        # an absolute share, not min-max: a lone partial match is not promoted to 1
        (64, {3: 16}, [3], [0.25]),
        (64, {0: 16, 1: 16}, [0, 1], [0.25, 0.25]),
        # more cached than the prompt (a planned group's whole prefix) is a full match
        (1000, {2: 1500}, [2, 0], [1.0, 0.0]),
        # nothing cached anywhere: all zero, not all best
        (1000, {}, [0, 1, 2, 3], [0.0, 0.0, 0.0, 0.0]),
        # an empty prompt matches nothing
        (0, {0: 100}, [0, 1], [0.0, 0.0]),
        (1000, {0: 100}, [], []),
    ],
)
def test_prefix_match_grades(
    make_ctx: MakeContext,
    tokens: int,
    cached: dict[int, int],
    candidates: list[int],
    grades: list[float],
) -> None:
    ctx = make_ctx(states(4), query(chain(1, 2), tokens=tokens), cached=cached)
    got = PrefixMatchScorer().score(ctx, candidates)
    assert got == pytest.approx(grades)
    assert all(0.0 <= g <= 1.0 for g in got)


@pytest.mark.parametrize(
    ("cached", "best"),
    [({0: 16, 1: 32, 2: 48}, 2), ({1: 160}, 1), ({0: 999, 3: 1000}, 3)],
)
def test_deepest_match_grades_best(
    make_ctx: MakeContext, cached: dict[int, int], best: int
) -> None:
    ctx = make_ctx(states(4), query(chain(1, 2), tokens=1000), cached=cached)
    got = PrefixMatchScorer().score(ctx, [0, 1, 2, 3])
    assert max(range(4), key=got.__getitem__) == best
    assert [i for i, g in enumerate(got) if g == max(got)] == [best]


def test_ignores_load(make_ctx: MakeContext) -> None:
    fleet = states(2)
    fleet[0].in_flight, fleet[0].kv_cache_usage_perc = 40, 0.95
    ctx = make_ctx(fleet, query(chain(1), tokens=100), cached={0: 100})
    assert PrefixMatchScorer().score(ctx, [0, 1]) == [1.0, 0.0]


def test_prefix_match_scorer_labels() -> None:
    assert PrefixMatchScorer.name == "prefix-match-scorer"
    assert "router prefix index" in PrefixMatchScorer.signals
    assert SCORERS["prefix-match-scorer"] == PrefixMatchScorer.from_params


def test_prefix_match_scorer_from_no_params() -> None:
    made = PrefixMatchScorer.from_params(Params({}, source="test.yaml", field="scorers[0]"))
    assert isinstance(made, PrefixMatchScorer)


@pytest.mark.parametrize("name", ["block_tokens", "min_match"])
def test_prefix_match_scorer_refuses_unknown_param(name: str) -> None:
    with pytest.raises(InputError, match="unknown parameter") as err:
        PrefixMatchScorer.from_params(Params({name: 16}, source="test.yaml", field="scorers[0]"))
    assert err.value.field == f"scorers[0].{name}"
    assert name in str(err.value)
