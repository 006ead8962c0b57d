"""The gate's precision and recall from a shadow run's outcomes."""

from __future__ import annotations

import pytest

from bench.loop.gate_quality import CHANCE_BANDS, gate_quality
from placement.domain.requests import DEFAULT_CLASSES, Request
from serving.admission.forecast import Forecast
from serving.admission.slo_gate import CREDIT, TPOT, TTFT, Judgement


def _served(i: int, prompt: int, ttft: float) -> Request:
    r = Request(i, 0.0, prompt, 10, tenant="a", request_class="interactive")
    r.first_token_s = ttft
    r.finish_s = ttft + 0.01 * 9
    return r


def test_precision_and_recall_count_refusals_against_misses() -> None:
    slo = DEFAULT_CLASSES["interactive"].ttft_slo_s
    requests = [
        _served(0, 1000, slo / 2),  # met, admitted
        _served(1, 1000, slo * 3),  # missed, the gate would refuse: right
        _served(2, 20_000, slo / 2),  # met, the gate would refuse: wrong
        _served(3, 40_000, slo * 3),  # missed, the gate would admit: not caught
    ]
    q = gate_quality(requests, dict(DEFAULT_CLASSES), {1, 2})
    assert q["refused"] == 2 and q["missed_if_admitted"] == 2
    assert q["precision"] == pytest.approx(0.5)
    assert q["recall"] == pytest.approx(0.5)
    buckets = q["by_prompt_bucket"]
    assert buckets["<4k"]["precision"] == 1.0
    assert buckets["16-32k"]["precision"] == 0.0
    assert buckets[">=32k"]["refused"] == 0 and buckets[">=32k"]["precision"] is None
    assert buckets["4-16k"]["requests"] == 0


def test_no_refusals_have_no_precision() -> None:
    q = gate_quality([_served(0, 100, 0.01)], dict(DEFAULT_CLASSES), set())
    assert q["precision"] is None and q["refused_share"] == 0.0


def test_per_rule_precision_and_forecast_error_when_judgements_are_given() -> None:
    slo = DEFAULT_CLASSES["interactive"].ttft_slo_s
    requests = [
        _served(0, 1000, slo * 3),  # refused for TTFT, missed: right
        _served(1, 1000, slo / 2),  # refused for credit, met: wrong
    ]
    judged = {
        0: Judgement(
            rule=TTFT,
            ttft_limit_s=slo,
            tpot_limit_s=0.1,
            forecast=Forecast(ttft_s=slo * 2, ttft_spread=0.05, tpot_s=0.005),
        ),
        1: Judgement(rule=CREDIT, ttft_limit_s=slo, tpot_limit_s=0.1),
    }
    q = gate_quality(requests, dict(DEFAULT_CLASSES), {0, 1}, judged)
    assert q["by_rule"][TTFT]["precision"] == 1.0
    assert q["by_rule"][CREDIT]["precision"] == 0.0
    assert q["forecast_error"]["ttft_actual_over_forecast"] == pytest.approx(1.5)
    assert q["forecast_error"]["tpot_actual_over_forecast"] == pytest.approx(2.0)


def test_per_rule_precision_by_decode_length() -> None:
    """A TPOT refusal of a short decode and one of a long decode are reported apart."""
    slo = DEFAULT_CLASSES["interactive"]
    short_late = Request(0, 0.0, 1000, 8, tenant="a", request_class="interactive")
    short_late.first_token_s, short_late.finish_s = 0.1, 0.1 + 7 * slo.tpot_slo_s * 2
    long_met = Request(1, 0.0, 1000, 400, tenant="a", request_class="interactive")
    long_met.first_token_s, long_met.finish_s = 0.1, 0.1 + 399 * slo.tpot_slo_s / 2
    long_late = Request(2, 0.0, 1000, 300, tenant="a", request_class="interactive")
    long_late.first_token_s, long_late.finish_s = 0.1, 0.1 + 299 * slo.tpot_slo_s * 2
    judged = {
        i: Judgement(rule=TPOT, ttft_limit_s=slo.ttft_slo_s, tpot_limit_s=slo.tpot_slo_s)
        for i in (0, 1, 2)
    }
    requests = [short_late, long_met, long_late]
    q = gate_quality(requests, dict(DEFAULT_CLASSES), {0, 1, 2}, judged)
    by = q["by_rule_decode"][TPOT]
    assert by["<16"]["refused"] == 1 and by["<16"]["precision"] == 1.0
    assert by[">=256"]["refused"] == 2 and by[">=256"]["precision"] == pytest.approx(0.5)
    assert by["16-255"]["refused"] == 0 and by["16-255"]["precision"] is None


def test_per_band_of_the_judged_chance_of_a_miss() -> None:
    """Refusals are reported by the chance of a miss the gate judged them at: a doubtful one
    (0.35) that met and a sure one (0.95) that missed fall in their own bands."""
    slo = DEFAULT_CLASSES["interactive"].ttft_slo_s
    requests = [_served(0, 1000, slo / 2), _served(1, 1000, slo * 3), _served(2, 1000, slo / 2)]
    judged = {
        0: Judgement(rule=TPOT, ttft_limit_s=slo, tpot_limit_s=0.1, miss_probability=0.35),
        1: Judgement(rule=TTFT, ttft_limit_s=slo, tpot_limit_s=0.1, miss_probability=0.95),
    }
    q = gate_quality(requests, dict(DEFAULT_CLASSES), {0, 1}, judged)
    by = q["by_chance"]
    assert list(by) == [name for name, _, _ in CHANCE_BANDS]
    assert by["<0.5"]["refused"] == 1 and by["<0.5"]["precision"] == 0.0
    assert by[">=0.9"]["refused"] == 1 and by[">=0.9"]["precision"] == 1.0
    assert by["0.5-0.7"]["refused"] == by["0.7-0.9"]["refused"] == 0
    assert sum(b["refused"] for b in by.values()) == q["refused"]
