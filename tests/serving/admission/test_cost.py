"""Requests priced in GPU-seconds on the kind that serves them."""

from __future__ import annotations

import numpy as np
import pytest

from serving.admission.cost import CACHE_HIT_CHARGE, gpu_rates, mean_rates
from serving.admission.vtc import TokenWeights

H100 = gpu_rates("H100-SXM", "llama-3-8b", 1)
L40S = gpu_rates("L40S", "llama-3-8b", 1)
REASONING = (56, 0, 980)  # a short prompt, a long answer
CODE = (2048, 0, 28)  # a long prompt, a short completion


def test_a_long_answer_costs_more_than_a_long_prompt_of_as_many_weighted_tokens() -> None:
    weights = TokenWeights()

    def tokens(r: tuple[int, int, int]) -> float:
        return weights.prefill * r[0] + weights.decode * r[2]

    # weighted tokens call them about equal (2,016 vs 2,104) …
    assert tokens(REASONING) == pytest.approx(tokens(CODE), rel=0.05)
    # … but a decode token is computed in an iteration shared by a batch, a prompt token in
    # a chunk of thousands: the reasoning request holds the GPU several times longer
    assert H100.request(*REASONING) > 4 * H100.request(*CODE)


def test_cached_prompt_tokens_are_discounted() -> None:
    whole = H100.prefill(8_000, 0)
    mostly_cached = H100.prefill(8_000, 6_000)
    assert mostly_cached == pytest.approx(H100.prompt_s * (2_000 + CACHE_HIT_CHARGE * 6_000))
    assert mostly_cached < 0.5 * whole
    assert H100.prefill(8_000, 20_000) == pytest.approx(H100.prefill(8_000, 8_000))  # capped


def test_a_slower_accelerator_charges_more_for_the_same_request() -> None:
    for request in (REASONING, CODE):
        assert L40S.request(*request) > 1.5 * H100.request(*request)


def test_tensor_parallel_replicas_hold_as_many_gpus() -> None:
    assert gpu_rates("H100-SXM", "llama-3-70b", 4).gpus == 4


def test_the_array_form_prices_like_one_request_at_a_time() -> None:
    inputs, cached, outputs = [56, 2048, 30_000, 0], [0, 1024, 29_000, 0], [980, 28, 300, 5]
    each = [H100.request(i, c, o) for i, c, o in zip(inputs, cached, outputs, strict=True)]
    assert H100.requests(inputs, cached, outputs) == pytest.approx(np.asarray(each))


def test_mean_rates_average_the_replicas() -> None:
    mean = mean_rates([("H100-SXM", "llama-3-8b", 1), ("L40S", "llama-3-8b", 1)])
    for request in (REASONING, CODE):
        expected = (H100.request(*request) + L40S.request(*request)) / 2
        assert mean.request(*request) == pytest.approx(expected)
