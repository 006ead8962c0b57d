"""Demand units carry what their means hide: the prompts' spread and the arrival times."""

from __future__ import annotations

import pytest

from placement.domain.requests import Request
from placement.solver.demand import aggregate_demand


def _req(i: int, t: float, prompt: int) -> Request:
    return Request(i, t, prompt, 50, tenant="a", model="m", block_hashes=(10_000 + i,))


def test_unit_keeps_its_prompt_spread_and_arrival_times() -> None:
    reqs = [_req(0, 3.0, 100), _req(1, 1.0, 300), _req(2, 2.0, 100), _req(3, 0.5, 300)]
    (unit,) = aggregate_demand(reqs, window_s=4.0, block_tokens=512)
    assert unit.mean_input_tokens == 200
    # prompts 100 and 300 around a mean of 200: variance 100², cv² = 0.25
    assert unit.prompt_scv == pytest.approx(0.25)
    assert unit.arrivals == (0.5, 1.0, 2.0, 3.0)


def test_equal_prompts_have_no_spread() -> None:
    (unit,) = aggregate_demand(
        [_req(i, float(i), 400) for i in range(5)], window_s=5.0, block_tokens=512
    )
    assert unit.prompt_scv == pytest.approx(0.0)
