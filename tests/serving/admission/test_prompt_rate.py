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
