"""`placement bench predictors --quick`: every split reported, in the issue's JSON shape."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from bench.predictors import (
    MIN_BUCKET_ROWS,
    PredictorBench,
    bucket_misses,
    simulated_runs,
    window_cut,
)
from models.quantile import QuantileConfig
from placement.cli import app
from placement.errors import InputError
from placement.paths import shared_data

pytestmark = pytest.mark.skipif(
    not (shared_data() / "traces/mooncake").exists(), reason="shared data missing"
)


def test_quick_bench_writes_rows_for_every_split(tmp_path: Path) -> None:
    out = tmp_path / "predictors.json"
    outcome = CliRunner().invoke(
        app, ["bench", "predictors", "--quick", "--seed", "1", "--out", str(out)]
    )
    assert outcome.exit_code == 0, outcome.output
    assert json.loads(out.read_text())["seed"] == 1
    rows = json.loads(out.read_text())["rows"]
    splits = {row["split"] for row in rows}
    assert splits == {
        "heldout",
        "splitwise",
        "splitwise:cross_hardware:A100-80G",
        "splitwise:cross_hardware:H100-SXM",
        "splitwise:sim_only",
        "leave_out:A100-80G",
        "leave_out:L40S",
    }
    for row in rows:
        assert set(row) == {"target", "quantile", "split", "mape", "median_ape", "coverage", "n"}
        assert row["target"] in {"ttft", "tpot", "throughput"}
        assert row["n"] > 0
        if row["quantile"] == 0.95:
            assert 0.0 <= row["coverage"] <= 1.0
        else:
            assert row["mape"] >= 0.0
            if row["target"] != "throughput":
                assert 0.0 <= row["median_ape"] <= row["mape"] * 10
    payload = json.loads(out.read_text())
    buckets = payload["buckets"]
    heldout_n = {
        r["target"]: r["n"] for r in rows if r["split"] == "heldout" and r["quantile"] == 0.5
    }
    for target in ("ttft", "tpot"):
        for by, names in (
            ("prompt_tokens", {"<4k", "4-16k", "16-32k", ">=32k"}),
            ("in_flight", {"0", "1-3", "4-7", "8+"}),
        ):
            mine = [b for b in buckets if b["target"] == target and b["by"] == by]
            assert {b["bucket"] for b in mine} == names
            # every held-out row falls in exactly one bucket of each kind
            assert sum(b["n"] for b in mine) == heldout_n[target]
            for b in mine:
                assert b["n"] == 0 or (0.0 <= b["coverage"] <= 1.0 and b["median_ape"] >= 0.0)
        loads = [b for b in buckets if b["target"] == target and b["by"] == "offered_load"]
        assert {b["bucket"] for b in loads} == {"0.5", "1"}
        for by in ("output_tokens", "accelerator", "workload"):
            mine = [b for b in buckets if b["target"] == target and b["by"] == by]
            assert sum(b["n"] for b in mine) == heldout_n[target], by
        workloads = {b["bucket"] for b in buckets if b["by"] == "workload"}
        assert workloads == {"mooncake"}
    assert payload["bucket_misses"] == bucket_misses(buckets)


def _bucket(n: int, median_ape: float, coverage: float) -> dict[str, object]:
    return {
        "target": "tpot",
        "by": "prompt_tokens",
        "bucket": "16-32k",
        "mape": 0.3,
        "median_ape": median_ape,
        "coverage": coverage,
        "n": n,
    }


def test_bucket_misses_name_the_missed_target_and_skip_sparse_buckets() -> None:
    rows = [
        _bucket(MIN_BUCKET_ROWS, 0.10, 0.95),  # meets both
        _bucket(MIN_BUCKET_ROWS, 0.30, 0.95),  # median error too high
        _bucket(MIN_BUCKET_ROWS + 1, 0.10, 0.99),  # p95 too loose
        _bucket(MIN_BUCKET_ROWS, 0.16, 0.90),  # both
        _bucket(MIN_BUCKET_ROWS - 1, 0.90, 0.10),  # too few rows to judge
    ]
    misses = bucket_misses(rows)
    assert [m["misses"] for m in misses] == ["median_ape", "coverage", "median_ape,coverage"]


def test_the_window_ends_before_the_trailing_traffic() -> None:
    start = pd.Timestamp("2026-01-01", tz="UTC")
    frame = pd.DataFrame({"arrival_time": start + pd.to_timedelta(np.arange(0, 151), unit="s")})
    assert window_cut(frame, 0.0) == start + pd.Timedelta(seconds=150)
    # 150 s of arrivals with a trailing half: the window is the first 100 s
    assert window_cut(frame, 0.5) == start + pd.Timedelta(seconds=100)
    with pytest.raises(InputError) as info:
        window_cut(frame, -0.1)
    assert info.value.field == "trailing_share"


def test_a_negative_trailing_share_is_refused_naming_the_option() -> None:
    outcome = CliRunner().invoke(app, ["bench", "predictors", "--trailing-share", "-0.5"])
    assert outcome.exit_code != 0
    assert "--trailing-share" in outcome.output


def test_another_seed_gives_other_traces_and_the_same_seed_the_same() -> None:
    """``--seed``: independent traces to choose settings on, the shipped seed's untouched."""
    small = PredictorBench(
        fleets=("h100x8",), workloads=("synthetic",), loads=(0.5,), duration_s=20
    )
    first = simulated_runs(small).train
    again = simulated_runs(small).train
    other = simulated_runs(dataclasses.replace(small, seed=1)).train
    pd.testing.assert_frame_equal(first, again)
    assert len(first) != len(other) or not np.array_equal(
        first["input_tokens"].to_numpy(), other["input_tokens"].to_numpy()
    )


def test_chosen_bench_follows_the_quick_flag_and_keeps_the_options() -> None:
    quick = PredictorBench.chosen(quick=True, trailing_share=0.25, seed=3)
    full = PredictorBench.chosen(quick=False, trailing_share=0.25, seed=3)
    assert quick == PredictorBench.quick(trailing_share=0.25, seed=3)
    assert full == PredictorBench(trailing_share=0.25, seed=3)
    assert quick.duration_s < full.duration_s
    # the router's rate stays out of the predictors unless asked for
    assert full.predictor.ignored_features == ("routed_requests_per_s",)
    reading = PredictorBench.chosen(quick=False, trailing_share=0.25, seed=3, routed_rate=True)
    assert reading.predictor.ignored_features == ()
    assert reading.seed == 3 and reading.trailing_share == 0.25


def test_group_calibration_is_off_unless_asked_for_and_keeps_the_other_options() -> None:
    assert PredictorBench.chosen(quick=False, trailing_share=0.5, seed=0).predictor == (
        QuantileConfig()
    )
    assert QuantileConfig().group_calibration == ()
    grouped = PredictorBench.chosen(
        quick=True, trailing_share=0.5, seed=2, routed_rate=True, group_calibration=True
    )
    assert grouped.predictor.group_calibration == ("ttft", "tpot")
    assert grouped.predictor.ignored_features == ()
    assert grouped.seed == 2
