from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest
from model_rows import request_rows

from models.features import FEATURES, feature_matrix
from models.predictor import LatencyPredictor, RooflineBaseline, latency_metrics
from models.quantile import (
    MIN_PROMPT_CALIBRATION_ROWS,
    PROMPT_EDGES,
    QuantileConfig,
    booster_params,
    conformal_offset,
    constraints_of,
    fit_quantile_model,
    monotone_constraints,
    pinball_objective,
    prior_of,
    prompt_offsets,
    time_split,
)
from placement.errors import InputError

LOAD_SWEEPS = {
    "num_requests_waiting": np.arange(0, 200, 2),
    "num_requests_running": np.arange(0, 300, 3),
    "kv_cache_usage_perc": np.linspace(0.0, 1.0, 101),
    "prompt_tokens_per_s": np.linspace(0.0, 60_000.0, 101),
    "generation_tokens_per_s": np.linspace(0.0, 6_000.0, 101),
    "backlog_requests": np.arange(0, 300, 3),
    "backlog_prefill_tokens": np.arange(0, 202_000, 2_000),
}


def test_constraints_cover_load_prior_and_prompt_features() -> None:
    ttft = dict(zip(FEATURES, monotone_constraints("ttft"), strict=True))
    tpot = dict(zip(FEATURES, monotone_constraints("tpot"), strict=True))
    for name in ("num_requests_waiting", "kv_cache_usage_perc", "ttft_prior_log_s"):
        assert ttft[name] == 1 and tpot[name] == 1
    assert ttft["uncached_tokens"] == 1 and tpot["uncached_tokens"] == 0
    assert ttft["prefix_cache_hit_rate"] == 0 and ttft["gpu_dense_tflops"] == 0
    for name in ("backlog_requests", "backlog_prefill_tokens", "routed_requests_per_s"):
        assert ttft[name] == 1 and tpot[name] == 1
    assert ttft["backlog_oldest_wait_s"] == -1 and tpot["backlog_oldest_wait_s"] == -1
    assert ttft["backlog_prefill_left_tokens"] == 1 and tpot["backlog_prefill_left_tokens"] == 1


@pytest.mark.parametrize("column", sorted(LOAD_SWEEPS))
@pytest.mark.parametrize("accelerator", ["H100-SXM", "L40S"])
def test_predicted_latency_never_falls_as_load_rises(
    monotone_predictor: LatencyPredictor, column: str, accelerator: str
) -> None:
    values = LOAD_SWEEPS[column]
    rows = request_rows(len(values), accelerator=accelerator)
    rows[column] = values
    predicted = monotone_predictor.predict(rows)
    for name in predicted.columns:
        assert np.all(np.diff(predicted[name].to_numpy()) >= 0), name


@pytest.mark.parametrize("backlog", [0, 20_000])
def test_latency_never_rises_as_the_oldest_request_ahead_waits_longer(
    monotone_predictor: LatencyPredictor, backlog: int
) -> None:
    waits = np.linspace(0.0, 30.0, 61)
    rows = request_rows(len(waits), backlog_prefill_tokens=backlog)
    rows["backlog_oldest_wait_s"] = waits
    predicted = monotone_predictor.predict(rows)
    for name in predicted.columns:
        assert np.all(np.diff(predicted[name].to_numpy()) <= 0), name


def test_ttft_never_falls_as_the_prompt_grows(monotone_predictor: LatencyPredictor) -> None:
    uncached = np.arange(1, 8000, 40)
    rows = request_rows(len(uncached), input_tokens=8000)
    rows["uncached_tokens"] = uncached
    predicted = monotone_predictor.predict(rows)
    assert np.all(np.diff(predicted["ttft_p50"].to_numpy()) >= 0)
    assert np.all(np.diff(predicted["ttft_p95"].to_numpy()) >= 0)


def test_ttft_never_falls_as_the_routers_prefill_backlog_grows(
    monotone_predictor: LatencyPredictor,
) -> None:
    backlog = np.arange(0, 400_000, 1_000)
    rows = request_rows(len(backlog), backlog_requests=16)
    rows["backlog_prefill_tokens"] = backlog
    predicted = monotone_predictor.predict(rows)
    for name in ("ttft_p50", "ttft_p95"):
        ttft = predicted[name].to_numpy()
        assert np.all(np.diff(ttft) >= 0), name
        assert ttft[-1] > ttft[0], name  # the model does use it


def test_p95_is_never_below_p50(
    predictor: LatencyPredictor, split: tuple[pd.DataFrame, pd.DataFrame]
) -> None:
    predicted = predictor.predict(split[1])
    assert (predicted["ttft_p95"] >= predicted["ttft_p50"]).all()
    assert (predicted["tpot_p95"] >= predicted["tpot_p50"]).all()
    assert (predicted > 0).all().all()


def test_beats_the_roofline_prior_on_the_held_out_tail(
    predictor: LatencyPredictor, split: tuple[pd.DataFrame, pd.DataFrame]
) -> None:
    head, tail = split
    learned = latency_metrics(predictor, tail)
    for baseline in (RooflineBaseline(), RooflineBaseline.calibrated(head)):
        prior = latency_metrics(baseline, tail)
        for target in ("ttft", "tpot"):
            for score in ("mape_p50", "pinball_p50", "pinball_p95"):
                assert learned[target][score] < prior[target][score], (target, score)
    for target in ("ttft", "tpot"):
        assert 0.85 <= learned[target]["coverage_p95"] <= 1.0


def test_fitting_twice_gives_identical_models(split: tuple[pd.DataFrame, pd.DataFrame]) -> None:
    head = split[0].iloc[:1500]
    a = LatencyPredictor(QuantileConfig(max_rounds=5)).fit(head)
    b = LatencyPredictor(QuantileConfig(max_rounds=5)).fit(head)
    assert all(a.models[k].to_text() == b.models[k].to_text() for k in a.models)


def test_time_split_keeps_the_latest_rows_for_stopping_then_calibration() -> None:
    order = np.arange(100)[::-1].copy()  # row 99 arrived first
    split = time_split(order, 0.2)
    assert split.train.tolist() == list(range(99, 19, -1))
    assert split.stop.tolist() == list(range(19, 9, -1))
    assert split.calibrate.tolist() == list(range(9, -1, -1))
    with pytest.raises(InputError, match="cannot be split"):
        time_split(np.arange(5), 0.2)


def test_conformal_offset_uses_the_finite_sample_rank() -> None:
    residual = np.arange(1.0, 20.0)  # 19 values: rank ceil(20 * 0.95) = 19 → the largest
    assert conformal_offset(residual, 0.95) == 19.0
    assert conformal_offset(residual, 0.5) == 10.0
    assert conformal_offset(np.empty(0), 0.95) == 0.0


def test_pinball_gradients_point_towards_the_quantile_with_irls_weights() -> None:
    class Labels:
        def __init__(self, weight: np.ndarray | None = None) -> None:
            self.weight = weight

        def get_label(self) -> np.ndarray:
            return np.zeros(3)

        def get_weight(self) -> np.ndarray | None:
            return self.weight

    score = np.array([1.0, -1.0, -0.2])
    grad, hess = pinball_objective(0.9)(score, Labels())  # type: ignore[arg-type]
    assert grad.tolist() == pytest.approx([0.1, -0.9, -0.9])
    # Newton step of a lone row = its residual: IRLS weights are (α or 1 − α) / |residual|
    assert (-grad / hess).tolist() == pytest.approx([-1.0, 1.0, 0.2])
    # row weights scale both, so a lone row's Newton step is unchanged
    weighted = Labels(np.array([2.0, 1.0, 0.5]))
    wgrad, whess = pinball_objective(0.9)(score, weighted)  # type: ignore[arg-type]
    assert wgrad.tolist() == pytest.approx([0.2, -0.9, -0.45])
    assert (-wgrad / whess).tolist() == pytest.approx([-1.0, 1.0, 0.2])


def test_constraints_apply_only_to_the_models_the_config_names() -> None:
    default = QuantileConfig()
    assert constraints_of(default, "ttft", 0.95) == monotone_constraints("ttft")
    assert constraints_of(default, "tpot", 0.95) == monotone_constraints("tpot")
    assert constraints_of(default, "ttft", 0.5) == [0] * len(FEATURES)
    assert constraints_of(default, "tpot", 0.5) == [0] * len(FEATURES)
    assert constraints_of(QuantileConfig(monotone=("tpot_p50",)), "tpot", 0.5) == (
        monotone_constraints("tpot")
    )
    assert constraints_of(QuantileConfig(monotone=()), "ttft", 0.95) == [0] * len(FEATURES)


def test_booster_params_carry_the_constraint_method() -> None:
    params = booster_params(QuantileConfig(monotone_method="advanced"), [1, 0])
    assert params["monotone_constraints_method"] == "advanced"
    assert params["monotone_constraints"] == [1, 0]
    assert booster_params(QuantileConfig(), [1])["monotone_constraints_method"] == "intermediate"


def test_prompt_offsets_are_conformal_per_bucket_and_never_fall_with_prompt_size() -> None:
    n = MIN_PROMPT_CALIBRATION_ROWS * 5
    rng = np.random.default_rng(0)
    short, mid, long_ = 1000.0, 8000.0, 20_000.0
    tokens = np.concatenate([np.full(n, short), np.full(n, mid), np.full(n, long_)])
    # the long prompts' residuals run higher, the middle ones lower than the short ones'
    residual = np.concatenate(
        [rng.normal(0.0, 0.1, n), rng.normal(-0.5, 0.1, n), rng.normal(0.4, 0.1, n)]
    )
    shifts = prompt_offsets(residual, tokens, 0.95)
    assert len(shifts) == len(PROMPT_EDGES) + 1
    assert shifts[0] > 0.0
    assert shifts[1] == shifts[0]  # its own shift is lower: the shorter bucket's holds
    assert shifts[2] > shifts[1]
    assert np.mean(residual[2 * n :] <= shifts[2]) >= 0.95  # the long rows are covered
    assert shifts[3] == shifts[2]  # no rows of 32k+: the shorter bucket's shift
    # too few rows to calibrate on: no shift of their own
    few = prompt_offsets(
        residual[: MIN_PROMPT_CALIBRATION_ROWS - 1], tokens[: MIN_PROMPT_CALIBRATION_ROWS - 1], 0.95
    )
    assert few == (0.0, 0.0, 0.0, 0.0)


def test_ttft_p95_never_falls_as_the_prompt_crosses_the_calibration_buckets(
    monotone_predictor: LatencyPredictor,
) -> None:
    tokens = np.arange(1000, 60_000, 500)
    rows = request_rows(len(tokens))
    rows["input_tokens"] = tokens
    rows["uncached_tokens"] = tokens
    predicted = monotone_predictor.predict(rows)
    assert np.all(np.diff(predicted["ttft_p95"].to_numpy()) >= 0)
    model = monotone_predictor.models["ttft_p95"]
    assert len(model.prompt_offsets) == len(PROMPT_EDGES) + 1
    assert list(model.prompt_offsets) == sorted(model.prompt_offsets)
    assert monotone_predictor.models["tpot_p95"].prompt_offsets == ()
    assert monotone_predictor.models["ttft_p50"].prompt_offsets == ()


def test_upper_quantiles_calibrate_prompt_shifts_on_the_whole_tail() -> None:
    """With ``prompt_shift_rows="tail"``, long prompts that reach the tail only among its
    stopping rows still get a shift of their own, for TPOT as for TTFT; calibrated on the
    calibration half alone (the default), which holds none of them, they take the shorter
    bucket's."""
    n = 600
    rng = np.random.default_rng(1)
    tokens = np.full(n, 1500.0)
    stop = np.arange(360, 480)
    tokens[stop[::2]] = 20_000.0  # 60 long prompts, all in the stopping rows
    rows = request_rows(n)
    rows["input_tokens"] = tokens
    rows["uncached_tokens"] = tokens
    rows["num_requests_running"] = rng.integers(1, 32, n)
    rows["output_tokens"] = rng.integers(50, 500, n)
    features = feature_matrix(rows)
    noise = np.exp(rng.normal(0.0, 0.1, n))
    split = time_split(np.arange(n, dtype=np.int64), 0.4)
    assert set(stop) == set(split.stop.tolist())
    both = QuantileConfig(prompt_calibration=("ttft", "tpot"), prompt_shift_rows="tail")
    for target in ("ttft", "tpot"):
        # the prior's latency, and 1.5× it on the long prompts: the booster never saw one
        latency = prior_of(features, target) * noise * np.where(tokens > 16_384, 1.5, 1.0)
        model = fit_quantile_model(features, latency, split, target=target, alpha=0.95, config=both)
        shifts = model.prompt_offsets
        assert len(shifts) == len(PROMPT_EDGES) + 1
        assert shifts[2] > shifts[1] + 0.2, target
        long_rows = stop[::2]
        covered = latency[long_rows] <= model.predict(features.take(long_rows))
        assert covered.mean() >= 0.95, target
        half = fit_quantile_model(
            features,
            latency,
            split,
            target=target,
            alpha=0.95,
            config=dataclasses.replace(both, prompt_shift_rows="calibrate"),
        )
        assert half.prompt_offsets[2] == half.prompt_offsets[1], target
