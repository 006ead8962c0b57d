from __future__ import annotations

import numpy as np
import pytest
from model_rows import request_rows

from models.features import feature_matrix, parse_rows
from models.roofline_prior import prior_generation_rate, prior_latency
from placement.domain.accelerators import get_accelerator
from placement.domain.llm import get_model
from sim.costmodel.factory import cost_model_for

SWEEPS = {
    "input_tokens": np.arange(1000, 40000, 997),
    "num_requests_running": np.arange(0, 600, 7),
    "num_requests_waiting": np.arange(0, 300, 3),
    "kv_cache_usage_perc": np.linspace(0.0, 1.0, 41),
    "prompt_tokens_per_s": np.linspace(0.0, 2e5, 41),
    "backlog_prefill_tokens": np.arange(0, 400_000, 5_000),
}


def _prior(column: str, values: np.ndarray, **fixed: object):
    rows = request_rows(len(values), **fixed)
    rows[column] = values
    return feature_matrix(rows).prior


@pytest.mark.parametrize("column", sorted(SWEEPS))
def test_prior_never_falls_as_load_or_prompt_grows(column: str) -> None:
    fixed: dict[str, object] = {"input_tokens": 40000, "uncached_tokens": 1000}
    prior = _prior(column, SWEEPS[column], **fixed)
    assert np.all(np.diff(prior.ttft_s) >= 0)
    assert np.all(np.diff(prior.tpot_s) >= 0)


def test_ttft_prior_grows_with_uncached_tokens_across_chunk_boundaries() -> None:
    uncached = np.arange(1, 20000, 37)
    rows = request_rows(len(uncached), input_tokens=20000, num_requests_running=40)
    rows["uncached_tokens"] = uncached
    ttft = feature_matrix(rows).prior.ttft_s
    assert np.all(np.diff(ttft) > 0)


def test_prior_is_finite_and_positive_at_extremes() -> None:
    rows = request_rows(3).assign(
        num_requests_running=[0, 5000, 0],
        num_requests_waiting=[0, 10_000, 0],
        kv_cache_usage_perc=[0.0, 1.0, 0.0],
        prompt_tokens_per_s=[0.0, 1e9, 0.0],
        input_tokens=[1, 200_000, 1],
        uncached_tokens=[0, 200_000, 1],
        output_tokens=[0, 100_000, 1],
    )
    prior = feature_matrix(rows).prior
    for values in (prior.ttft_s, prior.tpot_s, prior.prefill_s):
        assert np.all(np.isfinite(values)) and np.all(values > 0)


def test_lone_request_matches_the_kinds_cost_model() -> None:
    """One chunk on an idle replica is exactly one iteration of the kind's own cost model (the
    simulator's: measured tables under the calibrated stack); so is a lone decode."""
    cost = cost_model_for(get_accelerator("A100-80G"), get_model("llama-3-8b"), 1)
    rows = request_rows(
        accelerator="A100-80G",
        num_requests_running=0,
        kv_cache_usage_perc=0.0,
        prompt_tokens_per_s=0.0,
        input_tokens=1500,
        uncached_tokens=1000,
        output_tokens=200,
    )
    prior = feature_matrix(rows).prior
    prefill = cost.overhead_s + cost.linear_s(1000) + cost.prefill_attention_s(1000, 500)
    assert prior.ttft_s[0] == pytest.approx(prefill, rel=1e-9)
    decode = cost.iteration_s([], 1, 1500 + 100)
    assert prior.tpot_s[0] == pytest.approx(decode, rel=1e-9)


def test_queue_term_counts_waiting_requests_and_prefill_share_stretches_tpot() -> None:
    idle = _prior("num_requests_waiting", np.array([0, 4]))
    assert idle.queue_s[0] == 0 and idle.queue_s[1] > 0
    assert idle.ttft_s[1] == pytest.approx(idle.prefill_s[1] + idle.queue_s[1])
    busy = _prior("prompt_tokens_per_s", np.array([0.0, 50_000.0]), prefix_cache_hit_rate=0.0)
    assert busy.prefill_share[0] == 0 and 0 < busy.prefill_share[1] <= 0.9
    assert busy.tpot_s[1] == pytest.approx(busy.decode_step_s[1] / (1 - busy.prefill_share[1]))


def test_queue_term_is_the_larger_of_the_routers_backlog_and_the_waiting_guess() -> None:
    # no prefix hits: 8192 backlog tokens are 4 full 2048-token iterations (8 running -> 2040)
    rows = request_rows(3, prefix_cache_hit_rate=0.0, num_requests_waiting=2)
    rows["backlog_prefill_tokens"] = [0, 1000, 8192]
    prior = feature_matrix(rows).prior
    # 0 and 1000 backlog tokens are below the gauges' guess of 2 × 1024 waiting tokens
    assert prior.queue_s[0] == prior.queue_s[1] > 0
    assert prior.queue_s[2] == pytest.approx(prior.queue_s[0] * 8192 / 2048)
    # a prefix-cache hit rate scales the backlog down to its uncached part
    half = feature_matrix(rows.assign(prefix_cache_hit_rate=0.5)).prior
    assert half.queue_s[2] == pytest.approx(prior.queue_s[2] / 2, rel=1e-6)


def test_generation_rate_prior_is_zero_idle_and_grows_with_the_batch() -> None:
    running = np.array([0, 1, 8, 64, 256])
    rows = request_rows(len(running), prompt_tokens_per_s=0.0)
    rows["num_requests_running"] = running
    rate = prior_generation_rate(parse_rows(rows).prior)
    assert rate[0] == 0
    assert np.all(np.diff(rate) > 0)


def test_prior_latency_works_on_parsed_rows_directly() -> None:
    inputs = parse_rows(request_rows(4)).prior
    prior = prior_latency(inputs)
    assert prior.ttft_s.shape == (4,)
    taken = prior.take(np.array([1, 3]))
    np.testing.assert_array_equal(taken.tpot_s, prior.tpot_s[[1, 3]])
