from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from model_rows import request_rows

from models.features import feature_matrix
from models.group_calibration import (
    MIN_GROUP_ROWS,
    GroupCalibration,
    GroupPartition,
    fit_group_calibration,
    group_index,
)
from models.predictor import LatencyPredictor
from models.quantile import TARGETS, QuantileConfig
from placement.errors import InputError


def test_ranged_groups_are_half_open_and_categorical_values_unseen_get_none() -> None:
    values = np.array([0.0, 1.0, 3.0, 4.0, 8.0, 50.0])
    assert group_index(values, (1.0, 4.0, 8.0), False).tolist() == [0, 1, 1, 2, 3, 3]
    assert group_index(np.array([989.0, 362.0, 5.0]), (362.0, 989.0), True).tolist() == [1, 0, -1]


def _rows(n: int, rng: np.random.Generator) -> pd.DataFrame:
    rows = request_rows(n)
    rows["input_tokens"] = rng.choice([1_000, 8_000, 20_000, 40_000], size=n)
    rows["uncached_tokens"] = rows["input_tokens"]
    rows["backlog_requests"] = rng.choice([0, 2, 5, 12], size=n)
    rows["output_tokens"] = rng.choice([32, 128, 512, 2_000], size=n)
    return rows


def _coverage_by_group(
    residual: np.ndarray, shift: np.ndarray, features: object, calibration: GroupCalibration
) -> list[float]:
    out = []
    for partition in calibration.partitions:
        group = partition.groups(features)  # type: ignore[arg-type]
        for k in range(len(partition.offsets)):
            rows = group == k
            if rows.sum() >= MIN_GROUP_ROWS:
                out.append(float(np.mean(residual[rows] <= shift[rows])))
    return out


def test_raking_brings_every_group_to_the_quantile_where_one_shift_does_not() -> None:
    rng = np.random.default_rng(0)
    rows = _rows(4_000, rng)
    features = feature_matrix(rows)
    # residual spread grows with the prompt and with the requests in flight
    scale = 0.1 + rows["input_tokens"].to_numpy() / 40_000 + rows["backlog_requests"] / 20
    residual = rng.normal(size=len(rows)) * scale.to_numpy()
    calibration = fit_group_calibration(residual, features, 0.95)
    shift = calibration.log_shift(features)
    coverage = _coverage_by_group(residual, shift, features, calibration)
    assert len(coverage) == 4 + 4 + 4 + 1  # one accelerator in the rows
    assert all(0.93 <= c <= 0.97 for c in coverage), coverage
    one_shift = np.full(len(rows), np.quantile(residual, 0.95))
    before = _coverage_by_group(residual, one_shift, features, calibration)
    assert min(before) < 0.93 < 0.97 < max(before)


def test_thin_groups_keep_offset_zero() -> None:
    rng = np.random.default_rng(1)
    rows = _rows(400, rng)
    rows.loc[: MIN_GROUP_ROWS - 2, "backlog_requests"] = 100  # a thin 8+ group
    rows.loc[MIN_GROUP_ROWS:, "backlog_requests"] = 0
    features = feature_matrix(rows)
    calibration = fit_group_calibration(rng.normal(size=len(rows)), features, 0.95)
    in_flight = next(p for p in calibration.partitions if p.feature == "backlog_requests")
    assert in_flight.offsets[1:] == (0.0, 0.0, 0.0)
    assert in_flight.offsets[0] != 0.0


def test_mismatched_inputs_are_refused() -> None:
    features = feature_matrix(request_rows(3))
    with pytest.raises(InputError, match="residuals"):
        fit_group_calibration(np.zeros(2), features, 0.95)
    with pytest.raises(InputError, match="offsets"):
        GroupPartition(feature="input_tokens", edges=(1.0,), categorical=False, offsets=(0.0,))
    with pytest.raises(InputError, match="unknown feature"):
        GroupPartition(feature="colour", edges=(), categorical=True, offsets=())


def test_the_predictor_applies_saves_and_loads_its_group_factors(
    split: tuple[pd.DataFrame, pd.DataFrame], predictor: LatencyPredictor, tmp_path: Path
) -> None:
    grouped = LatencyPredictor(QuantileConfig(group_calibration=TARGETS)).fit(split[0])
    assert sorted(grouped.group_calibration) == ["tpot_p95", "ttft_p95"]
    assert predictor.group_calibration == {}
    heldout = split[1]
    plain, calibrated = predictor.predict(heldout), grouped.predict(heldout)
    # the p50s are untouched; the p95s move by their groups' factors
    for column in ("ttft_p50", "tpot_p50"):
        np.testing.assert_array_equal(plain[column], calibrated[column])
    assert not np.allclose(plain["ttft_p95"], calibrated["ttft_p95"])
    loaded = LatencyPredictor.load(grouped.save(tmp_path / "grouped"))
    pd.testing.assert_frame_equal(loaded.predict(heldout), calibrated)
