"""``least-predicted-ttft-picker``: eligible candidates (preferred first, then ring order, at
most ``limit``) ranked by predicted TTFT, least first; ties keep candidate order."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from route_builders import chain, query, states

from placement.errors import InputError
from serving.route.plugins import PICKERS
from serving.route.plugins.base import FallbackContext
from serving.route.plugins.params import Params
from serving.route.plugins.pickers.least_predicted_ttft_picker import LeastPredictedTtftPicker
from serving.route.ttft import QUEUED_PROMPT_TOKENS

MakeContext = Callable[..., FallbackContext]
Q = int(QUEUED_PROMPT_TOKENS)


@pytest.mark.parametrize(
    ("own", "waiting", "cached", "expected"),
    [
        # least prefill queued ahead first
        ([50_000, 500, 20_000, 0], [0, 0, 0, 0], {}, [3, 1, 2, 0]),
        ([0, 1, 2, 3], [0, 0, 0, 0], {}, [0, 1, 2, 3]),
        # the scraped queue counts at QUEUED_PROMPT_TOKENS a request
        ([0, 0, 0, 0], [3, 1, 2, 0], {}, [3, 1, 2, 0]),
        # the larger of own count and scraped queue, not their sum:
        # r0 max(Q, Q) < r1 Q + 500 < r3 2Q − 1 < r2 max(0, 2Q)
        ([Q, Q + 500, 0, 2 * Q - 1], [1, 0, 2, 0], {}, [0, 1, 3, 2]),
        # a cached prefix shortens the prefill: deepest match first
        ([0, 0, 0, 0], [0, 0, 0, 0], {2: 900, 0: 500}, [2, 0]),
        # … unless a long queue sits in front of it
        ([0, 0, 60_000, 0], [0, 0, 0, 0], {2: 900, 0: 500}, [0]),
    ],
)
def test_least_predicted_ttft_ranking(
    make_ctx: MakeContext,
    own: list[int],
    waiting: list[float],
    cached: dict[int, int],
    expected: list[int],
) -> None:
    fleet = states(4)
    for s, o, w in zip(fleet, own, waiting, strict=True):
        s.in_flight_prefill_tokens, s.num_requests_waiting = o, w
    ctx = make_ctx(fleet, query(chain(1, 2), tokens=1000), cached=cached)
    ranked = LeastPredictedTtftPicker().rank(ctx)
    assert ranked[: len(expected)] == expected
    assert sorted(ranked) == [0, 1, 2, 3]
    ttft = [ctx.predicted_ttft(i) for i in ranked]
    assert ttft == sorted(ttft)


@pytest.mark.parametrize(
    ("preferred", "limit", "ineligible"),
    [
        ((), 8, ()),
        ((2,), 8, ()),
        ((3, 1), 8, ()),
        ((3, 1), 2, ()),
        ((), 8, (0, 2)),
        ((1,), 3, (1,)),
    ],
)
def test_ties_keep_candidate_order(
    make_ctx: MakeContext, preferred: tuple[int, ...], limit: int, ineligible: tuple[int, ...]
) -> None:
    ctx = make_ctx(states(4), preferred=preferred, limit=limit, ineligible=ineligible)
    candidates = ctx.candidates()
    assert LeastPredictedTtftPicker().rank(ctx) == candidates
    eligible_preferred = [i for i in dict.fromkeys(preferred) if i not in ineligible]
    assert candidates[: len(eligible_preferred)] == eligible_preferred[:limit]


@pytest.mark.parametrize(
    ("preferred", "limit", "expected"),
    [
        # the idle r2 and r3 lie beyond the limit: only the preferred are considered
        ((0, 1), 2, [1, 0]),
        ((1, 0), 2, [1, 0]),
        ((0,), 1, [0]),
        # with room for all, the idle ones win
        ((0, 1), 4, None),
    ],
)
def test_considers_at_most_limit_candidates(
    make_ctx: MakeContext, preferred: tuple[int, ...], limit: int, expected: list[int] | None
) -> None:
    fleet = states(4)
    fleet[0].in_flight_prefill_tokens = 5000
    fleet[1].in_flight_prefill_tokens = 1000
    ranked = LeastPredictedTtftPicker().rank(make_ctx(fleet, preferred=preferred, limit=limit))
    if expected is None:
        assert sorted(ranked[:2]) == [2, 3] and ranked[2:] == [1, 0]
    else:
        assert ranked == expected


@pytest.mark.parametrize(
    ("ineligible", "expected"),
    [((3,), [1, 2, 0]), ((3, 1), [2, 0]), ((0, 1, 2, 3), [])],
)
def test_skips_ineligible_replicas(
    make_ctx: MakeContext, ineligible: tuple[int, ...], expected: list[int]
) -> None:
    fleet = states(4)
    for s, own in zip(fleet, [50_000, 500, 20_000, 0], strict=True):
        s.in_flight_prefill_tokens = own
    ctx = make_ctx(fleet, ineligible=ineligible, preferred=(3,))
    assert LeastPredictedTtftPicker().rank(ctx) == expected


def test_ranks_only_the_query_models_pool(make_ctx: MakeContext) -> None:
    fleet = states(3) + states(3, model="other-model", prefix="o")
    fleet[0].in_flight_prefill_tokens = 10_000
    ctx = make_ctx(fleet, preferred=(4, 0), cached={4: 1000})
    ranked = LeastPredictedTtftPicker().rank(ctx)
    assert sorted(ranked) == [0, 1, 2] and ranked[-1] == 0


def test_least_predicted_ttft_picker_labels() -> None:
    assert LeastPredictedTtftPicker.name == "least-predicted-ttft-picker"
    assert {"in_flight_prefill_tokens", "num_requests_waiting"} <= set(
        LeastPredictedTtftPicker.signals
    )
    assert PICKERS["least-predicted-ttft-picker"] == LeastPredictedTtftPicker.from_params


def test_least_predicted_ttft_picker_from_no_params() -> None:
    made = LeastPredictedTtftPicker.from_params(
        Params({}, source="test.yaml", field="fallbacks.picker"), ()
    )
    assert isinstance(made, LeastPredictedTtftPicker)


@pytest.mark.parametrize("name", ["candidates", "slo_s"])
def test_least_predicted_ttft_picker_refuses_unknown_param(name: str) -> None:
    with pytest.raises(InputError, match="unknown parameter") as err:
        LeastPredictedTtftPicker.from_params(
            Params({name: 4}, source="test.yaml", field="fallbacks.picker"), ()
        )
    assert err.value.field == f"fallbacks.picker.{name}"
    assert name in str(err.value)
