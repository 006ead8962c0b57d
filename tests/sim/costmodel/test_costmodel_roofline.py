"""The roofline fallback: hand-checkable formulas, fitted efficiencies that still hold."""

from __future__ import annotations

import numpy as np
import pytest

from placement.domain.accelerators import get_accelerator
from placement.domain.llm import get_model
from sim.costmodel.operators import shard_shapes
from sim.costmodel.profiled import ProfiledCostModel
from sim.costmodel.profiles import profiles_root
from sim.costmodel.roofline import (
    FITTED_EFFICIENCY,
    FitSample,
    RooflineCostModel,
    RooflineEfficiency,
    fit_efficiency,
    linear_work,
    peaks_of,
    profiled_samples,
    roofline_s,
)

needs_profiles = pytest.mark.skipif(not profiles_root().is_dir(), reason="profiles missing")


def test_decode_slope_is_the_kv_read_on_a_bandwidth_bound_gpu():
    # llama-3-8b on one L4: per context token and layer 2·8 kv heads·128·2 B read, 4·32·128 FLOPs
    eff = RooflineEfficiency(compute=0.5, memory=0.8)
    cm = RooflineCostModel(get_accelerator("L4"), get_model("llama-3-8b"), 1, efficiency=eff)
    memory = 32 * 2 * 8 * 128 * 2 / (0.3e12 * 0.8)
    compute = 32 * 4 * 32 * 128 / (121e12 * 0.5)
    assert memory > compute
    assert cm.decode_attention_coeffs(7)[1] == pytest.approx(memory, rel=1e-12)


def test_large_prefill_is_compute_bound():
    # 8192 more tokens through llama-3-8b's layers cost their GEMM FLOPs at eff·peak (the LM head
    # is capped at 256 rows, so it cancels out of the difference)
    eff = RooflineEfficiency(compute=0.5, memory=0.8)
    model = get_model("llama-3-8b")
    cm = RooflineCostModel(get_accelerator("L4"), model, 1, efficiency=eff)
    layer_params = model.params - 2 * model.vocab * model.hidden
    expected = 2 * 8192 * layer_params / (121e12 * 0.5)
    assert cm.linear_s(16384) - cm.linear_s(8192) == pytest.approx(expected, rel=0.01)


def test_fit_recovers_known_efficiencies():
    truth = RooflineEfficiency(compute=0.31, memory=0.83)
    shapes = shard_shapes(get_model("llama-2-70b"), 4)
    peaks = peaks_of(get_accelerator("H100-SXM"))
    samples = []
    for m in (1, 64, 512, 8192):
        works = tuple(linear_work(shapes, np.asarray([float(m)])))
        samples.append(
            FitSample(
                label=str(m),
                works=works,
                peaks=peaks,
                profiled_s=float(roofline_s(works, peaks, truth)[0]),
            )
        )
    assert fit_efficiency(samples) == truth


@needs_profiles
def test_stored_efficiencies_match_a_refit():
    refit = fit_efficiency(profiled_samples())
    assert refit.compute == pytest.approx(FITTED_EFFICIENCY.compute, abs=0.02)
    assert refit.memory == pytest.approx(FITTED_EFFICIENCY.memory, abs=0.02)


SCENARIOS = [
    ([], 1, 1000),
    ([], 32, 32 * 2000),
    ([], 128, 128 * 1000),
    ([(512, 0)], 0, 0),
    ([(2048, 0)], 0, 0),
    ([(8192, 0)], 0, 0),
    ([(512, 4096)], 64, 64 * 1000),
]


@needs_profiles
@pytest.mark.parametrize(
    ("kind", "model", "tp"),
    [
        ("H100-SXM", "llama-3-8b", 1),
        ("H100-SXM", "llama-2-70b", 4),
        ("A100-80G", "llama-2-70b", 8),
        ("A100-80G", "mixtral-8x7b", 4),
        ("L40S", "qwen2.5-32b", 1),
        ("B200", "qwen3-30b-a3b", 2),
    ],
)
def test_roofline_within_a_factor_of_the_profiled_model(kind, model, tp):
    accelerator, arch = get_accelerator(kind), get_model(model)
    profiled = ProfiledCostModel(accelerator, arch, tp)
    roofline = RooflineCostModel(accelerator, arch, tp)
    for scenario in SCENARIOS:
        ratio = roofline.iteration_s(*scenario) / profiled.iteration_s(*scenario)
        assert 1 / 2.5 < ratio < 2.5, scenario


def test_roofline_hot_path_is_plain_floats():
    cm = RooflineCostModel(get_accelerator("TPU-v5e"), get_model("llama-3-8b"), 2, reason="test")
    values = [
        cm.linear_s(64),
        cm.prefill_attention_s(512, 64),
        *cm.decode_attention_coeffs(8),
        cm.iteration_s([(512, 0)], 8, 8000),
    ]
    assert all(type(v) is float for v in values)
    assert cm.reason == "test"
