"""``decode-fit-scorer``: a short decode grades best the replicas whose full-chunk iteration
meets the TPOT limit; a long one fits anywhere."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest
from route_builders import chain, query, states

from placement.errors import InputError
from serving.route.plugins import SCORERS
from serving.route.plugins.base import FallbackContext
from serving.route.plugins.params import Params
from serving.route.plugins.scorers.decode_fit_scorer import DecodeFitScorer, full_chunk_step_s

MakeContext = Callable[..., FallbackContext]
KINDS = ("H100-SXM", "A100-80G", "L40S")


def test_the_physics_the_grades_rest_on() -> None:
    h100, a100, l40s = (full_chunk_step_s(k, "llama-3-8b", 1) for k in KINDS)
    assert h100 < 0.1 < min(a100, l40s)  # an interactive TPOT SLO of 100 ms


@pytest.mark.parametrize(
    ("output_tokens", "grades"),
    [
        (2, [1.0, 1 / 64, 1 / 64]),  # one decode iteration: only the H100 is safe
        (17, [1.0, 0.25, 0.25]),
        (65, [1.0, 1.0, 1.0]),  # 64 iterations average the chunks out: fits anywhere
        (2_000, [1.0, 1.0, 1.0]),
        (1, [1.0, 1.0, 1.0]),  # one output token has no TPOT: fits anywhere
    ],
)
def test_decode_fit_grades(make_ctx: MakeContext, output_tokens: int, grades: list[float]) -> None:
    fleet = states(3)
    for s, kind in zip(fleet, KINDS, strict=True):
        s.accelerator = kind
    q = dataclasses.replace(query(chain(1, 2)), max_output_tokens=output_tokens)
    got = DecodeFitScorer().score(make_ctx(fleet, q), [0, 1, 2])
    assert got == pytest.approx(grades)


def test_a_looser_limit_fits_more_kinds(make_ctx: MakeContext) -> None:
    fleet = states(2)
    fleet[1].accelerator = "L40S"
    q = dataclasses.replace(query(chain(1)), max_output_tokens=2)
    assert DecodeFitScorer(tpot_s=0.3).score(make_ctx(fleet, q), [0, 1]) == [1.0, 1.0]


def test_params() -> None:
    make = SCORERS["decode-fit-scorer"]
    built = make(Params({"tpot_s": 0.2, "average_iterations": 32}, source="p.yaml", field="s"))
    assert isinstance(built, DecodeFitScorer)
    assert (built.tpot_s, built.average_iterations) == (0.2, 32.0)
    with pytest.raises(InputError) as err:
        make(Params({"tpot_s": 0}, source="p.yaml", field="scorers[4]"))
    assert err.value.field == "scorers[4].tpot_s"
    with pytest.raises(InputError):
        make(Params({"tpot": 0.1}, source="p.yaml", field="s"))  # misspelt
