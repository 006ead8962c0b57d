from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from model_rows import request_rows

from models.features import FEATURES, feature_matrix
from models.predictor import LatencyPredictor, RooflineBaseline, arrival_order, latency_metrics
from models.quantile import (
    MIN_BUCKET_CALIBRATION_ROWS,
    MONDRIAN_EDGES,
    PROMPT_EDGES,
    QuantileConfig,
    booster_params,
    conformal_offset,
    constraints_of,
    mondrian_offsets,
    monotone_constraints,
    pinball_objective,
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
    for name in ("backlog_requests", "backlog_prefill_tokens"):
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


def _three_buckets() -> tuple[np.ndarray, np.ndarray, int]:
    """Residuals of short, middle and long prompts: the long ones run higher, the middle ones
    lower than the short ones'."""
    n = MIN_BUCKET_CALIBRATION_ROWS * 5
    rng = np.random.default_rng(0)
    tokens = np.concatenate([np.full(n, 1000.0), np.full(n, 8000.0), np.full(n, 20_000.0)])
    residual = np.concatenate(
        [rng.normal(0.0, 0.1, n), rng.normal(-0.5, 0.1, n), rng.normal(0.4, 0.1, n)]
    )
    return residual, tokens, n


def test_mondrian_offsets_cover_each_bucket_with_its_own_rows() -> None:
    residual, tokens, n = _three_buckets()
    shifts = mondrian_offsets(residual, tokens, "input_tokens", 0.95)
    assert len(shifts) == len(PROMPT_EDGES) + 1
    for k in range(3):
        rows = residual[k * n : (k + 1) * n]
        # each bucket at its own 95%: not wider than it needs (the middle bucket's shift is
        # below the short one's and below 0, where the old rule raised it to the short one's)
        assert 0.95 <= np.mean(rows <= shifts[k]) <= 0.97
    assert shifts[1] < 0.0 < shifts[0] < shifts[2]
    assert shifts[3] == shifts[2]  # no rows of 32k+: the bucket below's shift
    few = mondrian_offsets(
        residual[: MIN_BUCKET_CALIBRATION_ROWS - 1],
        tokens[: MIN_BUCKET_CALIBRATION_ROWS - 1],
        "input_tokens",
        0.95,
    )
    assert few == (0.0, 0.0, 0.0, 0.0)  # too few rows to calibrate on: no shift of their own


def test_monotone_mondrian_offsets_never_fall_as_the_bucket_rises() -> None:
    residual, tokens, _ = _three_buckets()
    free = mondrian_offsets(residual, tokens, "input_tokens", 0.95)
    shifts = mondrian_offsets(residual, tokens, "input_tokens", 0.95, monotone=True)
    assert list(shifts) == sorted(shifts)
    assert shifts[0] == free[0] and shifts[1] == free[0] and shifts[2] == free[2]


def test_the_upper_quantiles_carry_their_mondrian_shifts(predictor: LatencyPredictor) -> None:
    ttft, tpot = predictor.models["ttft_p95"], predictor.models["tpot_p95"]
    assert [f for f, _ in ttft.mondrian] == ["input_tokens"]
    assert [f for f, _ in tpot.mondrian] == ["kv_cache_usage_perc"]
    for feature, shifts in (*ttft.mondrian, *tpot.mondrian):
        assert len(shifts) == len(MONDRIAN_EDGES[feature]) + 1
    assert predictor.models["ttft_p50"].mondrian == () == predictor.models["tpot_p50"].mondrian


def test_kv_shifts_bring_each_kv_bucket_of_the_calibration_rows_to_its_quantile(
    split: tuple[pd.DataFrame, pd.DataFrame],
) -> None:
    """On the rows it is calibrated on, the TPOT p95 covers every quarter of KV use with enough
    rows at 0.95 or just above (split-conformal rank), not only the rows as a whole."""
    head = split[0]
    config = QuantileConfig()
    model = LatencyPredictor(config).fit(head).models["tpot_p95"]
    tpot = head["tpot_s"].to_numpy(dtype=np.float64)
    order = arrival_order(head)
    order = order[(np.isfinite(tpot) & (tpot > 0))[order]]  # the rows the fit trains TPOT on
    rows = time_split(order, config.tail_share).calibrate
    observed = tpot[rows]
    features = feature_matrix(head.iloc[rows].reset_index(drop=True))
    covered = observed <= model.predict(features)
    bucket = np.searchsorted(
        np.asarray(MONDRIAN_EDGES["kv_cache_usage_perc"]),
        features.column("kv_cache_usage_perc"),
        side="right",
    )
    checked = 0
    for k in range(len(MONDRIAN_EDGES["kv_cache_usage_perc"]) + 1):
        n = int((bucket == k).sum())
        if n >= MIN_BUCKET_CALIBRATION_ROWS:
            checked += 1
            assert 0.95 <= covered[bucket == k].mean() <= 0.95 + 2.0 / n, k
    assert checked >= 2


def test_ttft_p95_never_falls_as_the_prompt_crosses_the_calibration_buckets(
    monotone_predictor: LatencyPredictor,
) -> None:
    tokens = np.arange(1000, 60_000, 500)
    rows = request_rows(len(tokens))
    rows["input_tokens"] = tokens
    rows["uncached_tokens"] = tokens
    predicted = monotone_predictor.predict(rows)
    assert np.all(np.diff(predicted["ttft_p95"].to_numpy()) >= 0)
    (feature, shifts), *_ = monotone_predictor.models["ttft_p95"].mondrian
    assert feature == "input_tokens" and len(shifts) == len(PROMPT_EDGES) + 1
    assert list(shifts) == sorted(shifts)
