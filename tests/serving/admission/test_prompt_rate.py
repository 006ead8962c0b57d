from __future__ import annotations

import math

import pytest

from serving.admission.prompt_rate import RATE_WINDOW_S, PromptRates


def test_rates_count_dispatched_prompts_and_decay_with_time() -> None:
    rates = PromptRates()
    for k in range(10):
        rates.add("r0", 1_000, 100.0 + k * 0.001)
    assert rates.rate("r0", 100.01) == pytest.approx(10_000 / RATE_WINDOW_S, rel=0.01)
    assert rates.request_rate("r0", 100.01) == pytest.approx(10 / RATE_WINDOW_S, rel=0.01)
    later = rates.rate("r0", 100.01 + RATE_WINDOW_S)
    assert later == pytest.approx(10_000 / RATE_WINDOW_S / math.e, rel=0.01)
    assert rates.rate("r1", 100.0) == 0.0


def test_a_cached_prefix_is_received_but_not_computed() -> None:
    rates = PromptRates()
    assert rates.computed_share("r0") == 1.0
    assert rates.seconds_per_token("r0") is None
    for k in range(10):
        rates.add("r0", 1_000, 100.0 + k * 0.001, cached_tokens=600, work_s=0.04)
    # received as before; computed: the 400 new tokens of each
    assert rates.rate("r0", 100.01) == pytest.approx(10_000 / RATE_WINDOW_S, rel=0.01)
    assert rates.computed_rate("r0", 100.01) == pytest.approx(4_000 / RATE_WINDOW_S, rel=0.01)
    assert rates.computed_share("r0") == pytest.approx(0.4, rel=0.01)
    assert rates.seconds_per_token("r0") == pytest.approx(0.04 / 400, rel=0.01)
    rates.add("r0", 500, 100.02, cached_tokens=900)  # more cached than the prompt: none to do
    assert rates.computed_rate("r0", 100.02) == pytest.approx(4_000 / RATE_WINDOW_S, rel=0.01)
