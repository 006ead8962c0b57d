"""Validation against Splitwise and LLM-Inference-Bench: held-out rows, honest exclusions."""

from __future__ import annotations

import math
from dataclasses import replace

import pandas as pd
import pytest

from placement.domain.accelerators import get_accelerator
from placement.domain.fleet import DEFAULT_MAX_BATCHED_TOKENS
from placement.domain.llm import get_model
from placement.errors import InputError
from placement.paths import shared_data
from sim.costmodel.profiled import FRAMEWORK_OVERHEAD_S, ProfiledCostModel
from sim.costmodel.stack import StackCalibration
from sim.costmodel.validate import (
    SPLITWISE_CSV,
    VIEW_DEFAULT,
    VIEW_STACK,
    VIEW_TP2,
    Case,
    calibrate_framework_overhead,
    cross_hardware_folds,
    e2e_s,
    llm_inference_bench_cases,
    mean_decode_s,
    splitwise_cases,
    validation_report,
)

needs_data = pytest.mark.skipif(
    not (shared_data() / SPLITWISE_CSV).exists(), reason="shared data missing"
)


HARDWARE = ["A100-80G", "H100-SXM"]
OTHER = dict(zip(HARDWARE, reversed(HARDWARE), strict=True))
# Per GPU and TP: 19 decode configurations (batch × prompt × tokens) and 13 prefill ones
# (batch × prompt; the tokens sweep repeats the same prefill), minus batch 64 prefill at TP2.
DECODE_PER_TP, PREFILL_PER_TP = 19, 13


@pytest.fixture(scope="module")
def report():
    return validation_report()


@pytest.fixture(scope="module")
def rows(report):
    return report["rows"]


def _row(rows, view, hardware, phase):
    (row,) = [
        r
        for r in rows
        if r["view"] == view
        and r["source"] == "splitwise"
        and r["hardware"] == hardware
        and r["phase"] == phase
    ]
    assert row["model"] == "llama-2-70b"
    assert math.isfinite(row["median_ape"]) and 0.0 <= row["median_ape"] <= row["p90_ape"]
    return row


@needs_data
@pytest.mark.parametrize("hardware", HARDWARE)
@pytest.mark.parametrize("phase", ["prefill", "decode"])
def test_tp2_view_reports_only_tp4_and_tp8(rows, hardware, phase):
    row = _row(rows, VIEW_TP2, hardware, phase)
    per_tp = DECODE_PER_TP if phase == "decode" else PREFILL_PER_TP
    assert row["n"] == 2 * per_tp
    assert "TP2" in row["calibration"]


@needs_data
@pytest.mark.parametrize("hardware", HARDWARE)
@pytest.mark.parametrize("phase", ["prefill", "decode"])
def test_cross_hardware_rows_are_fitted_on_the_other_gpu(rows, hardware, phase):
    row = _row(rows, VIEW_STACK, hardware, phase)
    per_tp = DECODE_PER_TP if phase == "decode" else PREFILL_PER_TP
    assert row["n"] == 3 * per_tp - (phase == "prefill")
    assert f"fitted on {OTHER[hardware]}" in row["calibration"]


@needs_data
def test_stack_calibrations_are_reported_per_fold(report):
    folds = report["stack_calibrations"]
    assert {(f["fitted_on"], f["reported_on"]) for f in folds} == set(OTHER.items())
    for fold in folds:
        assert fold["n_fit"] == 3 * (DECODE_PER_TP + PREFILL_PER_TP) - 1
        assert 0.5 <= fold["compute_factor"] <= 2.0
        assert fold["host_overhead_s"] >= 0.0 and fold["all_reduce_hop_latency_s"] >= 0.0
        assert set(fold["fit_median_ape"]) == {"decode", "prefill"}


@needs_data
@pytest.mark.parametrize("hardware", HARDWARE)
@pytest.mark.parametrize("phase", ["prefill", "decode"])
def test_stack_fitted_on_one_gpu_beats_the_uncalibrated_model_on_the_other(rows, hardware, phase):
    calibrated = _row(rows, VIEW_STACK, hardware, phase)
    default = _row(rows, VIEW_DEFAULT, hardware, phase)
    assert calibrated["n"] == default["n"]
    assert calibrated["median_ape"] < default["median_ape"]


def _synthetic(hardware, tp, phase, stack, measured_scale=1.0):
    # host, all-reduce hops, compute above the floor (shrinks with tp), prefill sequences
    terms = (
        1.0,
        2 * 80 * (tp - 1),
        (0.2 if phase == "prefill" else 0.01) / tp,
        float(phase == "prefill"),
    )
    base = 0.03 / tp
    case = Case(
        source="s",
        hardware=hardware,
        model="m",
        tp=tp,
        phase=phase,
        batch=1,
        measured_s=1.0,
        base_s=base,
        iterations=1.0,
        stack_terms=terms,
        calibration_half=False,
    )
    return replace(case, measured_s=case.stack_predicted_s(stack) * measured_scale)


def test_cross_hardware_folds_never_report_fitted_rows():
    stack = StackCalibration(host_overhead_s=8e-3, all_reduce_hop_latency_s=2e-5)
    cases = [
        _synthetic(hw, tp, phase, stack, scale)
        for hw, scale in [("gpu-a", 1.0), ("gpu-b", 1.2)]
        for tp in (2, 4, 8)
        for phase in ("decode", "prefill")
    ]
    folds = cross_hardware_folds(cases)
    assert [(f["fitted_on"], f["reported_on"]) for f, _ in folds] == [
        ("gpu-a", "gpu-b"),
        ("gpu-b", "gpu-a"),
    ]
    for fold, fold_rows in folds:
        assert {r["hardware"] for r in fold_rows} == {fold["reported_on"]}
        assert sum(r["n"] for r in fold_rows) == 6
        assert fold["n_fit"] == 6
    # gpu-a is the stack exactly: a perfect in-sample fit, and on gpu-b (20 % slower) the
    # held-out error is the 1/6 the fit could not have seen
    fold, fold_rows = folds[0]
    assert max(fold["fit_median_ape"].values()) == pytest.approx(0.0, abs=1e-4)
    assert fold["host_overhead_s"] == pytest.approx(8e-3, rel=1e-2)
    assert all(r["median_ape"] == pytest.approx(1 / 6, rel=1e-3) for r in fold_rows)


@needs_data
def test_llm_inference_bench_rows_are_end_to_end_and_held_out(rows):
    bench = [r for r in rows if r["source"] == "llm_inference_bench"]
    assert {r["model"] for r in bench} == {"llama-3-8b", "llama-2-70b", "mixtral-8x7b"}
    assert all(r["phase"] == "e2e" and math.isfinite(r["median_ape"]) for r in bench)
    held_out = [c for c in llm_inference_bench_cases() if not c.calibration_half]
    assert sum(r["n"] for r in bench) == len(held_out)
    assert all(c.batch > 16 for c in held_out)


@needs_data
def test_physically_impossible_prefills_are_excluded():
    # batch 64 × 512 tokens of a 70B model cannot prefill in < 1 s on two GPUs
    prefill = [c for c in splitwise_cases() if c.phase == "prefill"]
    assert not [c for c in prefill if c.tp == 2 and c.batch == 64]
    assert len([c for c in prefill if c.tp == 2]) == 2 * (PREFILL_PER_TP - 1)


def _case(base, iterations, measured):
    return Case(
        stack_terms=(),
        source="t",
        hardware="h",
        model="m",
        tp=1,
        phase="decode",
        batch=1,
        measured_s=measured,
        base_s=base,
        iterations=iterations,
        calibration_half=True,
    )


def test_calibration_recovers_a_known_overhead():
    cases = [_case(b, it, b + 0.004 * it) for b, it in [(0.02, 1), (1.0, 130), (0.5, 12)]]
    assert calibrate_framework_overhead(cases) == pytest.approx(0.004)
    # a model that is already too slow gets no negative overhead
    assert calibrate_framework_overhead([_case(0.03, 1, 0.02)]) == 0.0


@needs_data
def test_stored_vllm_overhead_matches_its_calibration_half():
    cases = [c for c in llm_inference_bench_cases() if c.calibration_half]
    assert calibrate_framework_overhead(cases) == pytest.approx(FRAMEWORK_OVERHEAD_S, abs=2e-4)


@needs_data
def test_decode_mean_and_e2e_packing():
    cm = ProfiledCostModel(get_accelerator("H100-SXM"), get_model("llama-3-8b"), 1)
    steps = [cm.iteration_s([], 8, 8 * (512 + i)) for i in range(100)]
    assert mean_decode_s(cm, 8, 512, 100) == pytest.approx(sum(steps) / 100, rel=1e-12)
    # 16 prompts of 2048 tokens, packed whole into iterations of the default token budget,
    # then 2047 decodes
    per_iteration = max(1, DEFAULT_MAX_BATCHED_TOKENS // 2048)
    assert e2e_s(cm, 16, 2048)[1] == math.ceil(16 / per_iteration) + 2047


def test_missing_column_is_an_input_error(tmp_path):
    path = tmp_path / "perf_model.csv"
    pd.DataFrame({"model": ["llama2-70b"], "hardware": ["a100-80gb"]}).to_csv(path, index=False)
    with pytest.raises(InputError, match=r"perf_model\.csv.*tensor_parallel"):
        splitwise_cases(path)
