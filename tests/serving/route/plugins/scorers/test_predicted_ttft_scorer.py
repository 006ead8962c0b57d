"""``predicted-ttft-scorer``: lower predicted TTFT (uncached prefill + prefill queued ahead)
grades higher, min-max normalised over the candidates."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from route_builders import chain, query, states

from placement.errors import InputError
from serving.route.plugins import SCORERS
from serving.route.plugins.base import FallbackContext
from serving.route.plugins.params import Params
from serving.route.plugins.scorers.predicted_ttft_scorer import PredictedTtftScorer
from serving.route.ttft import QUEUED_PROMPT_TOKENS

MakeContext = Callable[..., FallbackContext]
Q = int(QUEUED_PROMPT_TOKENS)


@pytest.mark.parametrize(
    ("own", "waiting", "cached", "candidates", "grades"),
    [
        # same prompt, same kind: the grade is linear in the prefill queued ahead
        ([0, 5000, 50_000, 0], [0, 0, 0, 0], {}, [0, 1, 2], [1.0, 0.9, 0.0]),
        ([0, 5000, 50_000, 0], [0, 0, 0, 0], {}, [2, 1], [0.0, 1.0]),
        # the scraped queue counts at QUEUED_PROMPT_TOKENS a request: 2 · Q vs Q
        ([0, 0, Q, 0], [0, 2, 0, 0], {}, [0, 1, 2], [1.0, 0.0, 0.5]),
        # the larger of own count and scraped queue, not their sum: 3Q+100 > max(Q, 3Q)
        ([3 * Q + 100, Q, 0, 0], [0, 1, 3, 0], {}, [0, 1, 2], [0.0, 1.0, 100 / (2 * Q + 100)]),
        # a cached prefix shortens the prefill
        ([0, 0, 0, 0], [0, 0, 0, 0], {1: 900}, [0, 1], [0.0, 1.0]),
        ([0, 0, 0, 0], [0, 0, 0, 0], {1: 900, 2: 500}, [0, 1, 2], None),
        # … but not past a long queue
        ([0, 50_000, 0, 0], [0, 0, 0, 0], {1: 900}, [0, 1], [1.0, 0.0]),
        # all equal: all best
        ([0, 0, 0, 0], [0, 0, 0, 0], {}, [0, 1, 2, 3], [1.0, 1.0, 1.0, 1.0]),
        ([700, 700, 0, 0], [0, 0, 0, 0], {}, [1, 0], [1.0, 1.0]),
        ([40_000, 0, 0, 0], [0, 0, 0, 0], {}, [0], [1.0]),
    ],
)
def test_predicted_ttft_grades(
    make_ctx: MakeContext,
    own: list[int],
    waiting: list[float],
    cached: dict[int, int],
    candidates: list[int],
    grades: list[float] | None,
) -> None:
    fleet = states(len(own))
    for s, o, w in zip(fleet, own, waiting, strict=True):
        s.in_flight_prefill_tokens, s.num_requests_waiting = o, w
    ctx = make_ctx(fleet, query(chain(1, 2), tokens=1000), cached=cached)
    got = PredictedTtftScorer().score(ctx, candidates)
    assert all(0.0 <= g <= 1.0 for g in got)
    if grades is None:  # the deeper match is best, no match worst, the partial in between
        assert got[1] == 1.0 and got[0] == 0.0 and 0.0 < got[2] < 1.0
    else:
        assert got == pytest.approx(grades, rel=1e-9, abs=1e-12)


@pytest.mark.parametrize(
    ("own", "best"),
    [([9000, 10, 4000], 1), ([0, 1, 2], 0), ([30_000, 20_000, 10_000], 2)],
)
def test_least_predicted_ttft_grades_best(make_ctx: MakeContext, own: list[int], best: int) -> None:
    fleet = states(len(own))
    for s, o in zip(fleet, own, strict=True):
        s.in_flight_prefill_tokens = o
    got = PredictedTtftScorer().score(make_ctx(fleet), list(range(len(own))))
    assert [i for i, g in enumerate(got) if g == 1.0] == [best]


def test_ignores_decode_load(make_ctx: MakeContext) -> None:
    # requests past their first token hold no prefill: only queued prompt tokens count
    fleet = states(2)
    fleet[0].in_flight, fleet[0].kv_cache_usage_perc = 30, 0.9
    fleet[1].in_flight_prefill_tokens = 2000
    assert PredictedTtftScorer().score(make_ctx(fleet), [0, 1]) == [1.0, 0.0]


def test_predicted_ttft_scorer_labels() -> None:
    assert PredictedTtftScorer.name == "predicted-ttft-scorer"
    assert {"in_flight_prefill_tokens", "num_requests_waiting"} <= set(PredictedTtftScorer.signals)
    assert SCORERS["predicted-ttft-scorer"] == PredictedTtftScorer.from_params


def test_predicted_ttft_scorer_from_no_params() -> None:
    made = PredictedTtftScorer.from_params(Params({}, source="test.yaml", field="scorers[2]"))
    assert isinstance(made, PredictedTtftScorer)


@pytest.mark.parametrize("name", ["slo_s", "queued_prompt_tokens"])
def test_predicted_ttft_scorer_refuses_unknown_param(name: str) -> None:
    with pytest.raises(InputError, match="unknown parameter") as err:
        PredictedTtftScorer.from_params(Params({name: 1}, source="test.yaml", field="scorers[2]"))
    assert err.value.field == f"scorers[2].{name}"
    assert name in str(err.value)
