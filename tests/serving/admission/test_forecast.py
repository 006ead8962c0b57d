"""Forecast TTFT and TPOT of a request on a replica, and the chance that it misses."""

from __future__ import annotations

import dataclasses

import pytest

from serving.admission.forecast import Forecast, forecast, interleave
from serving.admission.tpot_calibration import BINS, PRIOR_WEIGHT, ChunkShares
from serving.route.decode_steps import decode_step_table
from serving.route.types import ReplicaState

L40S = decode_step_table("L40S", "llama-3-8b", 1)
H100 = decode_step_table("H100-SXM", "llama-3-8b", 1)


def _state(accelerator: str = "L40S", *, in_flight: int = 0, queued: int = 0) -> ReplicaState:
    return ReplicaState(
        id="r0",
        address="r0",
        model="llama-3-8b",
        accelerator=accelerator,
        tp=1,
        kv_capacity_tokens=190_000,
        in_flight=in_flight,
        in_flight_prefill_tokens=queued,
    )


def _seen(
    state: ReplicaState, *, output_tokens: int = 5, rate: float = 4_000.0, ratio: float = 0.7
) -> Forecast:
    table = L40S if state.accelerator == "L40S" else H100
    return forecast(
        predicted_ttft_s=1.0,
        state=state,
        table=table,
        ratio=ratio,
        spread=0.05,
        prompt_rate=rate,
        request_rate=rate / 1_000.0,
        input_tokens=500,
        output_tokens=output_tokens,
    )


def test_ttft_is_calibrated_and_stretched_by_the_decoders_sharing_the_chunks() -> None:
    idle = _seen(_state())
    busy = _seen(_state(in_flight=200))
    assert idle.ttft_s == pytest.approx(0.7 * idle.prior_ttft_s)
    assert 0.7 <= idle.ttft_s < busy.ttft_s
    assert interleave(L40S, 1.0, 0.0) == pytest.approx(1.0, abs=0.02)
    assert interleave(L40S, 200.0, 150_000.0) > 1.1


def test_ttft_miss_is_even_at_the_limit_and_sure_far_past_it() -> None:
    seen = Forecast(ttft_s=2.0, ttft_spread=0.05)
    assert seen.ttft_miss(2.0) == pytest.approx(0.5)
    assert Forecast(ttft_s=2.4, ttft_spread=0.05).ttft_miss(2.0) > 0.99
    assert Forecast(ttft_s=1.6, ttft_spread=0.05).ttft_miss(2.0) < 0.01
    assert Forecast(ttft_s=2.1, ttft_spread=0.0).ttft_miss(2.0) == 1.0


def test_tpot_miss_needs_a_full_chunk_step_slower_than_the_slo() -> None:
    queued = _state(queued=60_000)
    slow, fast = _seen(queued), _seen(_state("H100-SXM", queued=60_000))
    assert fast.full_step_s < 0.1 < slow.full_step_s  # physics of the two accelerators
    assert fast.tpot_miss(0.1) == 0.0
    assert slow.tpot_miss(0.1) > 0.9


@pytest.mark.parametrize(
    ("queued", "output_tokens", "likely"),
    [
        (0, 5, False),  # nothing queued, few arrivals: it decodes alone
        (60_000, 5, True),  # a backlog covering its few decode iterations
        (60_000, 400, False),  # the same backlog over a long decode averages out
    ],
)
def test_tpot_miss_grows_with_the_backlog_and_shrinks_with_the_decode(
    queued: int, output_tokens: int, likely: bool
) -> None:
    seen = _seen(_state(queued=queued), output_tokens=output_tokens, rate=1_000.0)
    assert (seen.tpot_miss(0.1) > 0.5) == likely


def test_one_output_token_and_unknown_replicas_have_no_tpot() -> None:
    assert _seen(_state(queued=60_000), output_tokens=1).tpot_miss(0.1) == 0.0
    unknown = forecast(
        predicted_ttft_s=1.0,
        state=None,
        table=None,
        ratio=0.5,
        spread=0.1,
        prompt_rate=0.0,
        request_rate=0.0,
        input_tokens=10,
        output_tokens=10,
    )
    assert unknown.ttft_s == 0.5 and unknown.tpot_miss(0.1) == 0.0
    both = Forecast(ttft_s=2.0, ttft_spread=0.05, step_s=0.2, full_step_s=0.2, gaps=3)
    assert both.miss(2.0, 0.1) == 1.0  # decode alone misses


def _shares(past: float, count: float) -> ChunkShares:
    """``count`` decodes observed, a share ``past`` of them through full chunks, the rest
    alone."""
    weights = [0.0] * BINS
    weights[0] = count * (1 - past)
    weights[-1] = count * past
    return ChunkShares(tuple(weights))


def test_observed_decodes_outweigh_the_model_as_they_accumulate() -> None:
    idle = _seen(_state(), output_tokens=12, rate=500.0)
    model = idle.tpot_miss(0.1)
    assert model < 0.05  # the Poisson model: nothing queued, a trickle arriving
    few = dataclasses.replace(idle, observed=_shares(0.8, 2.0))
    many = dataclasses.replace(idle, observed=_shares(0.8, 50.0))
    assert few.tpot_miss(0.1, observed=True) == pytest.approx(
        (2 * 0.8 + PRIOR_WEIGHT * model) / (2 + PRIOR_WEIGHT)
    )
    assert model < few.tpot_miss(0.1, observed=True) < many.tpot_miss(0.1, observed=True) < 0.8
    assert many.tpot_miss(0.1, observed=True) > 0.75
    assert many.miss(2.0, 0.1, observed=True) > 0.75
    # the model's own chance (what a refusal is judged by) is left as it was
    assert many.tpot_miss(0.1) == model and many.miss(2.0, 0.1) == pytest.approx(model, abs=1e-6)
    # a replica whose full-chunk step meets the SLO cannot miss it, whatever was observed
    fast = dataclasses.replace(_seen(_state("H100-SXM")), observed=_shares(1.0, 50.0))
    assert fast.tpot_miss(0.1, observed=True) == 0.0


@pytest.mark.parametrize("ratio", [0.5, 1.0])
def test_a_full_chunk_takes_the_kinds_prefill_time_whatever_the_cache_holds(ratio: float) -> None:
    # a chunk is prompt work to compute (the cached prefix is never in it): the calibration
    # ratio, which discounts the cached share of the prompts received, does not shorten it —
    # it lets the chunk carry more of the prompt tokens as received
    seen = _seen(_state(queued=60_000), output_tokens=50, ratio=ratio)
    budget = L40S.prompt_budget(1.0)
    assert seen.full_step_s - seen.step_s == pytest.approx(L40S.prefill_s_per_token * budget)
    assert seen.budget_tokens == pytest.approx(budget / ratio)


def test_the_prompts_arriving_through_its_whole_decode_share_its_iterations() -> None:
    # FCFS prefill: prompt work arriving at any time while it decodes is prefilled in its
    # iterations, not only half of it. Full chunks in half its iterations reach the limit
    # (step 40 ms, full 160 ms, TPOT SLO 100 ms); 15k prompt tokens/s over 400 iterations at
    # the limit bring 600k tokens against the 400k that fills half of them
    seen = Forecast(
        ttft_s=0.1,
        ttft_spread=0.05,
        step_s=0.04,
        full_step_s=0.16,
        gaps=400,
        budget_tokens=2_000.0,
        prompt_rate=15_000.0,
        request_rate=15_000.0 / 3_500.0,
    )
    assert seen.tpot_miss(0.1) > 0.9
    light = dataclasses.replace(seen, prompt_rate=7_500.0, request_rate=7_500.0 / 3_500.0)
    assert light.tpot_miss(0.1) < 0.1


def _by_work(
    by_work: bool,
    *,
    computed_share: float = 1.0,
    seconds_per_token: float | None = None,
    tpot_ratio: float = 1.0,
) -> Forecast:
    return forecast(
        predicted_ttft_s=0.2,
        state=_state(queued=40_000),
        table=L40S,
        ratio=0.7,
        spread=0.05,
        prompt_rate=1_000.0,
        request_rate=1.0,
        input_tokens=500,
        output_tokens=12,
        by_work=by_work,
        computed_share=computed_share,
        seconds_per_token=seconds_per_token,
        tpot_ratio=tpot_ratio,
    )


def test_without_by_work_the_work_inputs_change_nothing() -> None:
    plain = _by_work(False)
    assert _by_work(False, computed_share=0.25, seconds_per_token=1e-3, tpot_ratio=2.0) == plain
    assert plain.tpot_ratio == 1.0
    # the default: a chunk carries ``budget / ratio`` tokens as received
    assert plain.budget_tokens == pytest.approx(L40S.prompt_budget(1.0) / 0.7)


def test_by_work_counts_the_tokens_to_compute_at_what_they_cost() -> None:
    # 40k prompt tokens queued, three quarters of them a prefix the replica holds: what it
    # prefills beside a 12-token decode is 10k, not enough to fill the chunks it needs to miss
    whole = _by_work(True)
    cached = _by_work(True, computed_share=0.25)
    assert whole.budget_tokens == pytest.approx(L40S.prompt_budget(1.0))  # no TTFT ratio
    assert (whole.queued_tokens, cached.queued_tokens) == pytest.approx((40_000, 10_000))
    assert cached.tpot_miss(0.1) < 0.5 < 0.9 < whole.tpot_miss(0.1)
    # a computed token that attends to a long context costs more than the linear layers
    costly = _by_work(True, seconds_per_token=2 * L40S.prefill_s_per_token)
    assert costly.full_step_s - costly.step_s == pytest.approx(
        2 * (whole.full_step_s - whole.step_s)
    )


def test_the_tpot_ratio_scales_the_models_steps_not_the_observed_shares() -> None:
    seen = _seen(_state(queued=20_000), output_tokens=50, rate=3_000.0)
    limit = (seen.step_s + seen.full_step_s) / 2
    slow = dataclasses.replace(seen, tpot_ratio=1.3)
    fast = dataclasses.replace(seen, tpot_ratio=0.7)
    assert fast.tpot_miss(limit) < seen.tpot_miss(limit) < slow.tpot_miss(limit)
    assert dataclasses.replace(seen, tpot_ratio=1.0).tpot_miss(limit) == seen.tpot_miss(limit)
    # a replica whose decodes all met: the blend's observed side stays 0 whatever the ratio
    met = dataclasses.replace(slow, observed=_shares(0.0, 1_000.0))
    assert met.tpot_miss(limit, observed=True) < 0.01
