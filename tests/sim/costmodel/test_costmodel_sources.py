"""Where timings come from: profiles found in any folder, end-to-end measurements, or the
datasheet alone; and the expected error of each source."""

from __future__ import annotations

from pathlib import Path

import pytest
from catalogue_builders import restore_catalogue, write_catalogue

from placement.domain.accelerators import get_accelerator
from placement.domain.catalogue import add_profile_folders
from placement.domain.llm import get_model
from sim.costmodel.profiles import find_profile, profiles_root
from sim.costmodel.sources import (
    SOURCE_KINDS,
    accelerator_source,
    expected_errors,
    replica_source,
)

__all__ = ["restore_catalogue"]
needs_profiles = pytest.mark.skipif(not profiles_root().is_dir(), reason="profiles missing")

WITH_PROFILE_AND_MEASUREMENTS = """\
accelerators:
  - kind: H100-COPY
    dense_bf16_tflops: 989
    hbm_gb: 80
    hbm_tbps: 3.35
    cost_per_hour: 4
    profile: h100_copy
  - kind: MEASURED-ONLY
    dense_bf16_tflops: 500
    hbm_gb: 64
    hbm_tbps: 2
    cost_per_hour: 2
    measurements: [{file: runs.csv, columns: llm_inference_bench, hardware: Acme X}]
"""


@needs_profiles
def test_shipped_kinds_say_profiles_or_roofline_only() -> None:
    assert accelerator_source(get_accelerator("A100-80G")).source == "profiles"
    l4 = accelerator_source(get_accelerator("L4"))
    assert l4.source == "roofline only" and "datasheet" in l4.detail


@needs_profiles
def test_a_kind_whose_tables_miss_a_shape_says_what_came_from_the_datasheet() -> None:
    l40s = replica_source(get_accelerator("L40S"), get_model("llama-3-8b"), 2)
    assert l40s.source == "roofline only"
    assert "no all-reduce table for 2 GPUs" in l40s.detail
    assert "from the datasheet: all-reduce (the rest measured)" in l40s.detail
    # every profiled kind runs under the stack they share, fitted on their measured runs
    a100 = replica_source(get_accelerator("A100-80G"), get_model("qwen2.5-32b"), 4)
    assert a100.source == "roofline only"
    assert "no context attention for heads=10" in a100.detail
    assert "vLLM stack of shared" in a100.detail
    full = replica_source(get_accelerator("A100-80G"), get_model("llama-3-8b"), 1)
    assert full.source == "profiles" and "vLLM stack of shared" in full.detail
    mi300x = replica_source(get_accelerator("MI300X"), get_model("llama-3-8b"), 1)
    assert mi300x.source == "end-to-end fit" and "vLLM stack of MI300X" in mi300x.detail


def test_expected_errors_are_measured_figures_for_every_source() -> None:
    errors = expected_errors()
    assert set(errors) == set(SOURCE_KINDS)
    for figures in errors.values():
        assert 0.0 < float(figures["median_ape"]) < 1.0
        assert figures["what"] and figures["n"] > 0


@needs_profiles
@pytest.mark.usefixtures("restore_catalogue")
def test_profiles_and_measurements_in_a_new_folder_are_found(tmp_path: Path) -> None:
    folder = write_catalogue(tmp_path / "mine", accelerators_yaml=WITH_PROFILE_AND_MEASUREMENTS)
    (folder / "h100_copy").symlink_to(profiles_root() / "h100_sxm")
    add_profile_folders([folder])
    assert find_profile("h100_copy") == folder / "h100_copy"
    copy = get_accelerator("H100-COPY")
    assert accelerator_source(copy).source == "profiles"
    assert replica_source(copy, get_model("tiny-llama-1b"), 1).source == "profiles"
    measured = get_accelerator("MEASURED-ONLY")
    assert measured.measurements[0].file == str(folder / "runs.csv")
    assert accelerator_source(measured).source == "end-to-end fit"
