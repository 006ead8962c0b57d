from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from model_rows import request_rows

from models.predictor import (
    LATENCY_COLUMNS,
    MANIFEST,
    LatencyPredictor,
    PredictorNotFitted,
    RooflineBaseline,
    _measurement_weight,
    pinball_loss,
)
from models.quantile import QuantileConfig
from placement.errors import InputError


def test_save_and_load_give_identical_predictions(
    predictor: LatencyPredictor, split: tuple[pd.DataFrame, pd.DataFrame], tmp_path: Path
) -> None:
    directory = predictor.save(tmp_path / "predictor")
    manifest = json.loads((directory / MANIFEST).read_text())
    assert manifest["features"][0] == "gpu_dense_tflops"
    assert set(manifest["quantile_models"]) == set(LATENCY_COLUMNS)
    assert {"lightgbm", "numpy"} <= set(manifest["versions"])
    assert not list(directory.glob("*.pkl"))
    loaded = LatencyPredictor.load(directory)
    tail = split[1]
    pd.testing.assert_frame_equal(loaded.predict(tail), predictor.predict(tail), check_exact=True)
    np.testing.assert_array_equal(
        loaded.predict_throughput(tail), predictor.predict_throughput(tail)
    )


def test_predict_keeps_the_callers_index(predictor: LatencyPredictor) -> None:
    rows = request_rows(3)
    rows.index = pd.Index([10, 20, 30])
    predicted = predictor.predict(rows)
    assert predicted.index.tolist() == [10, 20, 30]
    assert tuple(predicted.columns) == LATENCY_COLUMNS


def test_unfitted_predictor_refuses_to_predict() -> None:
    with pytest.raises(PredictorNotFitted):
        LatencyPredictor().predict(request_rows())


def test_loading_a_directory_without_manifest_names_the_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=MANIFEST):
        LatencyPredictor.load(tmp_path)


def test_loading_a_model_trained_on_other_features_is_refused(
    predictor: LatencyPredictor, tmp_path: Path
) -> None:
    directory = predictor.save(tmp_path / "p")
    manifest = json.loads((directory / MANIFEST).read_text())
    manifest["features"] = manifest["features"][:-1]
    (directory / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(InputError, match="other features") as info:
        LatencyPredictor.load(directory)
    assert info.value.field == "features"


def test_fit_needs_arrival_times(split: tuple[pd.DataFrame, pd.DataFrame]) -> None:
    with pytest.raises(InputError, match="arrival_time"):
        LatencyPredictor().fit(split[0].drop(columns=["arrival_time"]))


def test_metrics_report_every_target_and_accelerator(
    predictor: LatencyPredictor, split: tuple[pd.DataFrame, pd.DataFrame]
) -> None:
    tail = split[1]
    metrics = predictor.metrics(tail)
    for target in ("ttft", "tpot"):
        scores = metrics[target]
        assert set(scores["by_accelerator"]) == set(tail["accelerator"])
        assert 0.0 < scores["coverage_p95"] <= 1.0
        assert scores["rows"] == pytest.approx(tail[f"{target}_s"].notna().sum())
        per_acc = scores["by_accelerator"]
        assert sum(s["rows"] for s in per_acc.values()) == scores["rows"]


def test_calibrated_baseline_brackets_the_observed_ratio(
    split: tuple[pd.DataFrame, pd.DataFrame],
) -> None:
    head = split[0]
    baseline = RooflineBaseline.calibrated(head)
    predicted = baseline.predict(head)
    for target in ("ttft", "tpot"):
        y = head[f"{target}_s"].to_numpy(dtype=float, na_value=np.nan)
        ok = np.isfinite(y) & (y > 0)
        assert np.mean(y[ok] <= predicted[f"{target}_p50"].to_numpy()[ok]) == pytest.approx(
            0.5, abs=0.01
        )
        assert np.mean(y[ok] <= predicted[f"{target}_p95"].to_numpy()[ok]) == pytest.approx(
            0.95, abs=0.01
        )


def test_pinball_loss_weights_under_and_over_prediction_by_the_quantile() -> None:
    observed = np.array([1.0, 1.0])
    assert pinball_loss(observed, np.array([0.0, 0.0]), 0.95) == pytest.approx(0.95)
    assert pinball_loss(observed, np.array([2.0, 2.0]), 0.95) == pytest.approx(0.05)


def test_measured_rows_pull_the_predictions_towards_them(
    split: tuple[pd.DataFrame, pd.DataFrame], predictor: LatencyPredictor
) -> None:
    rows = request_rows(1)
    plain = predictor.predict(rows)
    # a "real stack" three times slower than the simulator on exactly these rows
    measured = request_rows(
        200,
        ttft_s=3.0 * float(plain["ttft_p50"].iloc[0]),
        tpot_s=3.0 * float(plain["tpot_p50"].iloc[0]),
    )
    informed = LatencyPredictor().fit(split[0], measurements=measured)
    moved = informed.predict(rows)
    for target in ("ttft", "tpot"):
        wanted = 3.0 * float(plain[f"{target}_p50"].iloc[0])
        before = abs(float(plain[f"{target}_p50"].iloc[0]) - wanted)
        after = abs(float(moved[f"{target}_p50"].iloc[0]) - wanted)
        assert after < 0.5 * before, target
    assert informed.training["measured_rows"] == 200


def test_measured_rows_carry_half_the_training_loss() -> None:
    weight = _measurement_weight(telemetry_rows=9_000, measured_rows=300)
    assert weight * 300 == pytest.approx(9_000)
    assert _measurement_weight(telemetry_rows=9_000, measured_rows=0) == 1.0


def test_the_routed_rate_moves_predictions_only_where_the_settings_read_it(
    split: tuple[pd.DataFrame, pd.DataFrame], predictor: LatencyPredictor
) -> None:
    head, tail = split
    rows = tail.head(300).reset_index(drop=True)
    assert rows["routed_requests_per_s"].gt(0).any()  # the telemetry carries the router's rate
    quiet = rows.assign(routed_requests_per_s=0.0)
    # by default no booster reads it: whatever the caller passes changes nothing
    pd.testing.assert_frame_equal(predictor.predict(rows), predictor.predict(quiet))
    reading = LatencyPredictor(QuantileConfig(ignored_features=())).fit(head)
    moved = reading.predict(rows)["tpot_p50"] != reading.predict(quiet)["tpot_p50"]
    assert moved.any()


def test_an_unknown_ignored_feature_is_refused(split: tuple[pd.DataFrame, pd.DataFrame]) -> None:
    with pytest.raises(InputError, match="unknown feature arrivals_next_8s") as info:
        LatencyPredictor(QuantileConfig(ignored_features=("arrivals_next_8s",))).fit(split[0])
    assert info.value.field == "ignored_features"
