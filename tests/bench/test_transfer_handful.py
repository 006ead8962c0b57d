"""A profiled GPU treated as a datasheet-only one: transferred kernels under a handful's stack."""

from __future__ import annotations

import pytest

from bench.transfer import datasheet_handful, profiled_set
from placement.domain.accelerators import CATALOGUE
from sim.costmodel.measured import HANDFUL, measured_runs
from sim.costmodel.profiles import profiles_root

pytestmark = pytest.mark.skipif(not profiles_root().is_dir(), reason="profiles missing")


def test_h100_from_its_datasheet_and_a_handful_predicts_its_other_vllm_runs() -> None:
    profiled = profiled_set([CATALOGUE[k] for k in sorted(CATALOGUE)])
    (row,) = datasheet_handful(profiled, held_out=["H100-SXM"], frameworks_kept=["vLLM"])
    runs = [
        r
        for r in measured_runs(CATALOGUE["H100-SXM"])
        if r.framework == "vLLM" and r.source == "llm_inference_bench"
    ]
    assert len(runs) - HANDFUL <= row["n"] < len(runs)  # the handful is never reported
    assert "H100-SXM" not in row["kernels_fitted_on"]  # its own tables are not used
    assert row["median_ape"] < min(0.15, row["median_ape_no_fit"])
