"""``max-score-picker``: candidates ranked by the weighted sum of the profile's scorers,
highest first; ties keep candidate order (preferred replicas, then ring order)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from route_builders import chain, query, states

from placement.errors import InputError
from serving.route.plugins import PICKERS, ReplicaScorer
from serving.route.plugins.base import FallbackContext
from serving.route.plugins.params import Params
from serving.route.plugins.pickers.max_score_picker import MaxScorePicker
from serving.route.plugins.scorers.kv_usage_scorer import KvUsageScorer
from serving.route.plugins.scorers.prefix_match_scorer import PrefixMatchScorer
from serving.route.plugins.scorers.queue_scorer import QueueScorer

MakeContext = Callable[..., FallbackContext]


class _Unused:
    """A scorer that must not be consulted."""

    name = "unused-scorer"
    signals: tuple[str, ...] = ("nothing",)

    def score(self, ctx: FallbackContext, candidates: list[int]) -> list[float]:
        raise AssertionError("scored")


def _scorers(
    prefix: float = 0.0, queue: float = 0.0, kv: float = 0.0
) -> tuple[tuple[ReplicaScorer, float], ...]:
    return (
        (PrefixMatchScorer(), prefix),
        (QueueScorer(), queue),
        (KvUsageScorer(), kv),
    )


@pytest.mark.parametrize(
    ("weights", "in_flight", "usage", "cached", "totals"),
    [
        # the queue alone: least loaded first
        ((0, 1, 0), [3, 0, 1, 2], [0, 0, 0, 0], {}, [0.0, 1.0, 2 / 3, 1 / 3]),
        # a full prefix match outweighs the load it carries
        ((2, 1, 0), [0, 0, 0, 5], [0, 0, 0, 0], {3: 1000}, [1.0, 1.0, 1.0, 2.0]),
        # … a half match at equal weight does not
        ((1, 1, 0), [0, 0, 0, 5], [0, 0, 0, 0], {3: 500}, [1.0, 1.0, 1.0, 0.5]),
        # free KV cache against queue length
        ((0, 1, 1), [0, 0, 2, 0], [0.9, 0, 0, 0], {}, [1.1, 2.0, 1.0, 2.0]),
        # weights scale the grades: r0's short queue (1 × 1) does not make up for its KV
        # use (3 × 0.5)
        ((0, 1, 3), [0, 2, 2, 2], [0.5, 0, 0, 0], {}, [2.5, 3.0, 3.0, 3.0]),
        # a zero weight counts for nothing (r0's full KV cache would otherwise put r3 first)
        ((0, 1, 0), [0, 2, 2, 1], [1.0, 0, 0, 0], {}, [1.0, 0.0, 0.0, 0.5]),
        # all equal: candidate order
        ((1, 1, 1), [0, 0, 0, 0], [0, 0, 0, 0], {}, [2.0, 2.0, 2.0, 2.0]),
    ],
)
def test_max_score_ranking(
    make_ctx: MakeContext,
    weights: tuple[float, float, float],
    in_flight: list[int],
    usage: list[float],
    cached: dict[int, int],
    totals: list[float],
) -> None:
    fleet = states(4)
    for s, n, u in zip(fleet, in_flight, usage, strict=True):
        s.in_flight, s.kv_cache_usage_perc = n, u
    ctx = make_ctx(fleet, query(chain(1, 2), tokens=1000), cached=cached)
    candidates = ctx.candidates()
    assert sorted(candidates) == [0, 1, 2, 3]
    ranked = MaxScorePicker(_scorers(*weights)).rank(ctx)
    # highest total first; a stable sort keeps candidate order among equals
    assert ranked == sorted(candidates, key=lambda i: -totals[i])


@pytest.mark.parametrize(
    ("in_flight", "best"),
    [([3, 0, 1, 2], 1), ([0, 4, 4, 4], 0), ([9, 9, 9, 1], 3)],
)
def test_least_loaded_first(make_ctx: MakeContext, in_flight: list[int], best: int) -> None:
    fleet = states(4)
    for s, n in zip(fleet, in_flight, strict=True):
        s.in_flight = n
    assert MaxScorePicker(_scorers(queue=1)).rank(make_ctx(fleet))[0] == best


@pytest.mark.parametrize(
    ("preferred", "head"),
    [((2,), [2]), ((3, 0), [3, 0]), ((1, 1), [1])],
)
def test_ties_keep_preferred_first(
    make_ctx: MakeContext, preferred: tuple[int, ...], head: list[int]
) -> None:
    ranked = MaxScorePicker(_scorers(queue=1, kv=1)).rank(make_ctx(states(4), preferred=preferred))
    assert ranked[: len(head)] == head
    assert sorted(ranked) == [0, 1, 2, 3]


@pytest.mark.parametrize(
    ("ineligible", "limit", "size"),
    [((), 8, 4), ((1,), 8, 3), ((0, 1, 2), 8, 1), ((0, 1, 2, 3), 8, 0), ((), 2, 2), ((), 1, 1)],
)
def test_only_eligible_candidates_within_the_limit(
    make_ctx: MakeContext, ineligible: tuple[int, ...], limit: int, size: int
) -> None:
    fleet = states(4)
    fleet[1].in_flight = 0
    for s in fleet[2:]:
        s.in_flight = 3
    ctx = make_ctx(fleet, ineligible=ineligible, limit=limit)
    ranked = MaxScorePicker(_scorers(queue=1)).rank(ctx)
    assert len(ranked) == size
    assert not set(ranked) & set(ineligible)
    assert set(ranked) == set(ctx.candidates())


def test_a_preferred_replica_must_still_be_eligible(make_ctx: MakeContext) -> None:
    fleet = states(4)
    ctx = make_ctx(fleet, preferred=(2,), ineligible=(2,), cached={2: 1000})
    assert 2 not in MaxScorePicker(_scorers(prefix=1, queue=1)).rank(ctx)


def test_ranks_only_the_query_models_pool(make_ctx: MakeContext) -> None:
    fleet = states(3) + states(3, model="other-model", prefix="o")
    # even a preferred replica of another model is not a candidate
    ctx = make_ctx(fleet, preferred=(4,), cached={4: 1000})
    assert sorted(MaxScorePicker(_scorers(prefix=1, queue=1)).rank(ctx)) == [0, 1, 2]


@pytest.mark.parametrize("limit", [1, 8])
def test_zero_weight_and_lone_candidates_are_not_scored(make_ctx: MakeContext, limit: int) -> None:
    scorers: tuple[tuple[ReplicaScorer, float], ...] = ((_Unused(), 0.0), (QueueScorer(), 1.0))
    if limit == 1:  # a lone candidate needs no scoring at all
        scorers = ((_Unused(), 1.0),)
    ranked = MaxScorePicker(scorers).rank(make_ctx(states(4), limit=limit))
    assert len(ranked) == min(limit, 4)


def test_signals_are_the_scorers_in_order() -> None:
    picker = MaxScorePicker((*_scorers(1, 1, 1), (QueueScorer(), 2.0)))
    assert picker.signals == (
        *PrefixMatchScorer.signals,
        "in_flight",
        "num_requests_waiting",
        "kv_cache_usage_perc",
    )
    assert MaxScorePicker(()).signals == ()


def test_max_score_picker_labels() -> None:
    assert MaxScorePicker.name == "max-score-picker"
    assert PICKERS["max-score-picker"] == MaxScorePicker.from_params


def test_max_score_picker_from_params_takes_the_profile_scorers() -> None:
    scorers = _scorers(2, 1, 0.5)
    made = MaxScorePicker.from_params(
        Params({}, source="test.yaml", field="fallbacks.picker"), scorers
    )
    assert isinstance(made, MaxScorePicker)
    assert made.scorers == scorers


@pytest.mark.parametrize("name", ["weights", "candidates"])
def test_max_score_picker_refuses_unknown_param(name: str) -> None:
    with pytest.raises(InputError, match="unknown parameter") as err:
        MaxScorePicker.from_params(
            Params({name: 1}, source="test.yaml", field="fallbacks.picker"), _scorers(queue=1)
        )
    assert err.value.field == f"fallbacks.picker.{name}"
    assert name in str(err.value)
