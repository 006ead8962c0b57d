"""Validation against Splitwise and LLM-Inference-Bench: held-out halves, honest exclusions."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from placement.domain.accelerators import get_accelerator
from placement.domain.llm import get_model
from placement.errors import InputError
from placement.paths import shared_data
from sim.costmodel.profiled import FRAMEWORK_OVERHEAD_S, ProfiledCostModel
from sim.costmodel.validate import (
    SPLITWISE_CSV,
    Case,
    calibrate_framework_overhead,
    e2e_s,
    llm_inference_bench_cases,
    mean_decode_s,
    splitwise_cases,
    validation_rows,
)

needs_data = pytest.mark.skipif(
    not (shared_data() / SPLITWISE_CSV).exists(), reason="shared data missing"
)


@pytest.fixture(scope="module")
def rows():
    return validation_rows()


@needs_data
@pytest.mark.parametrize("hardware", ["A100-80G", "H100-SXM"])
@pytest.mark.parametrize("phase", ["prefill", "decode"])
def test_splitwise_median_ape_is_reported_and_finite(rows, hardware, phase):
    (row,) = [
        r
        for r in rows
        if r["source"] == "splitwise" and r["hardware"] == hardware and r["phase"] == phase
    ]
    assert row["model"] == "llama-2-70b"
    assert math.isfinite(row["median_ape"]) and 0.0 <= row["median_ape"] <= row["p90_ape"]
    # held out: TP4 and TP8 only (TP2 calibrates the overhead), 19 configurations each
    assert row["n"] == 38
    assert "TP2" in row["calibration"]


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
    assert len([c for c in prefill if c.tp == 2]) == 2 * 18


def _case(base, iterations, measured):
    return Case(
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
    # 16 prompts of 2048 tokens: 4 per 8192-token iteration → 4 prefills, then 2047 decodes
    assert e2e_s(cm, 16, 2048)[1] == 4 + 2047


def test_missing_column_is_an_input_error(tmp_path):
    path = tmp_path / "perf_model.csv"
    pd.DataFrame({"model": ["llama2-70b"], "hardware": ["a100-80gb"]}).to_csv(path, index=False)
    with pytest.raises(InputError, match=r"perf_model\.csv.*tensor_parallel"):
        splitwise_cases(path)
