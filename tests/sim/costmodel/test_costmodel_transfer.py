"""The datasheet fallback: utilization surfaces learned across accelerators, their file, and
the tables they synthesise."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from placement.domain.accelerators import get_accelerator
from placement.domain.llm import get_model
from placement.errors import InputError
from sim.costmodel.profiled import ProfiledCostModel
from sim.costmodel.profiles import load_profile, profiles_root
from sim.costmodel.roofline import RooflineCostModel
from sim.costmodel.transfer import (
    COLUMN_PRIOR_GPUS,
    FAMILIES,
    Observations,
    Peaks,
    Sol,
    TransferModel,
    context_attention_sol,
    default_transfer,
    fit_gemm,
    fit_surface,
    fit_transfer,
    gemm_sol,
    observations,
    save_transfer,
    synthetic_profile,
)

needs_profiles = pytest.mark.skipif(not profiles_root().is_dir(), reason="profiles missing")


def _gemm_calls(peaks: Peaks, utilization: float, floor_s: float) -> Observations:
    """Calls whose latency is a launch floor plus SOL at a fixed utilization."""
    grid = np.asarray([1, 4, 16, 64, 256, 1024, 4096, 16384], dtype=np.float64)
    m, n, k = (a.ravel() for a in np.meshgrid(grid, grid * 4, grid * 2))
    sol = gemm_sol(peaks, m, n, k)
    return Observations(sol, floor_s + sol.seconds / utilization)


def _columned(peaks: Peaks, slow: dict[tuple[int, int], float]) -> Observations:
    """GEMM calls at 70 % of SOL, but the columns in ``slow`` run that many times slower."""
    calls = _gemm_calls(peaks, 0.7, 3e-6)
    grid = np.asarray([1, 4, 16, 64, 256, 1024, 4096, 16384], dtype=np.float64)
    _, n, k = (a.ravel() for a in np.meshgrid(grid, grid * 4, grid * 2))  # as _gemm_calls
    columns = np.stack([n, k], axis=1).astype(np.int64)
    factor = np.asarray([slow.get((int(a), int(b)), 1.0) for a, b in columns])
    return Observations(calls.sol, calls.latency * factor, columns)


def test_a_gemm_column_slow_on_every_gpu_is_predicted_slow_on_a_gpu_left_out():
    slow = {(4096, 2048): 1.6, (256, 8): 1.4}
    a, b, c = (Peaks(f, w, 4e11) for f, w in ((3e14, 2e12), (1e15, 3.3e12), (1.2e15, 3.5e12)))
    surface, effects = fit_gemm([_columned(a, slow), _columned(b, slow)])
    # shrunk towards 0: two GPUs measured it, the one predicted counts as a third
    assert (
        np.log(1.6) * 0.5 < effects[(4096, 2048)] < np.log(1.6) * 2 / (2 + COLUMN_PRIOR_GPUS) + 0.1
    )
    assert abs(effects[(256, 128)]) < 0.02  # an ordinary column
    assert np.median(list(effects.values())) == pytest.approx(0.0, abs=1e-9)  # the typical is 0
    model = TransferModel(
        surfaces={"gemm": surface},
        fitted_on=("a", "b"),
        gemm_columns=effects,  # type: ignore[dict-item]
    )
    held = _columned(c, slow)
    assert held.columns is not None
    mask = (held.columns[:, 0] == 4096) & (held.columns[:, 1] == 2048)
    with_effects = model.predict("gemm", held)[mask] / held.latency[mask]
    without = model.latency("gemm", held.sol)[mask] / held.latency[mask]
    # 1.6× slow; the effect shrunk to about 2/3 of log 1.6 leaves about 15 %
    assert np.median(np.abs(with_effects - 1)) < 0.2 and np.median(np.abs(without - 1)) > 0.3
    assert (
        model.column_effect(4096, 2048) == effects[(4096, 2048)]
        and model.column_effect(3, 5) == 0.0
    )


def test_skewed_calls_are_reported_but_not_fitted():
    a, b = Peaks(3e14, 2e12, 4e11), Peaks(1e15, 3.3e12, 4e11)
    clean = [_gemm_calls(a, 0.7, 3e-6), _gemm_calls(b, 0.7, 3e-6)]
    other = _gemm_calls(a, 0.2, 3e-5)  # another operator: far slower
    skewed = np.r_[np.zeros(len(clean[0].latency), bool), np.ones(len(other.latency), bool)]
    mixed = Observations(
        Sol.concatenate([clean[0].sol, other.sol]),
        np.r_[clean[0].latency, other.latency],
        skewed=skewed,
    )
    assert len(mixed.fitted().latency) == len(clean[0].latency)
    kept = fit_surface("moe", [mixed, clean[1]])
    assert np.allclose(kept.values, fit_surface("moe", clean).values)


def test_a_surface_learned_on_two_gpus_predicts_a_third_with_the_same_behaviour():
    a, b, c = (Peaks(f, w, 4e11) for f, w in ((3e14, 2e12), (1e15, 3.3e12), (2e15, 8e12)))
    surface = fit_surface("gemm", [_gemm_calls(a, 0.7, 3e-6), _gemm_calls(b, 0.7, 3e-6)])
    held = _gemm_calls(c, 0.7, 3e-6)
    ape = np.abs(surface.latency(held.sol) / held.latency - 1.0)
    assert np.median(ape) < 0.05
    assert surface.median_ape < 0.05 and surface.rows > 0


def _floor_in_cycles(peaks: Peaks, clock_ghz: float) -> Observations:
    """Calls whose latency is a launch floor of 6,000 cycles of ``clock_ghz`` plus SOL at 70 %
    (``peaks`` may or may not know the clock)."""
    calls = _gemm_calls(peaks, 0.7, 0.0)
    return Observations(calls.sol, calls.latency + 6000 / (clock_ghz * 1e9))


def test_a_launch_floor_in_cycles_transfers_to_a_gpu_of_another_clock():
    datasheets = ((3e14, 2e12, 1.4), (1e15, 3.3e12, 1.8), (4e14, 0.9e12, 2.5))  # last: L40S-like
    clocked = [_floor_in_cycles(Peaks(f, w, 4e11, c), c) for f, w, c in datasheets]
    surface = fit_surface("gemm", clocked[:2])
    ape = np.abs(surface.latency(clocked[2].sol) / clocked[2].latency - 1.0)
    # the same calls with the SOL axis in seconds (no clock on the datasheets) do not transfer
    unclocked = [_floor_in_cycles(Peaks(f, w, 4e11), c) for f, w, c in datasheets]
    in_seconds = fit_surface("gemm", unclocked[:2])
    ape_s = np.abs(in_seconds.latency(unclocked[2].sol) / unclocked[2].latency - 1.0)
    assert np.quantile(ape, 0.75) < 0.03 and np.quantile(ape_s, 0.75) > 0.1


def _ramp_in_sm_cycles(peaks: Peaks, sms: int) -> Observations:
    """GEMM calls at 70 % of SOL once each of ``sms`` SMs has its share of tiles: the time
    lost to the ramp and the tail wave shrinks with the SOL in SM-cycles (clock · SMs), not in
    cycles (``peaks`` may or may not know the SM count)."""
    calls = _gemm_calls(peaks, 0.7, 0.0)
    sm_cycles = calls.sol.seconds * peaks.clock_ghz * 1e9 * sms
    return Observations(calls.sol, calls.latency * (1.0 + np.sqrt(2e6 / sm_cycles)))


def test_a_gemm_ramp_in_sm_cycles_transfers_to_a_gpu_with_more_sms():
    datasheets = ((3e14, 2e12, 1.4, 108), (1e15, 3.3e12, 2.0, 132), (2.2e15, 8e12, 2.0, 148))
    apes = []
    for sm_count_known in (True, False):
        calls = [
            _ramp_in_sm_cycles(Peaks(f, w, 4e11, c, u if sm_count_known else 137), u)
            for f, w, c, u in datasheets
        ]
        surface = fit_surface("gemm", calls[:2])
        apes.append(np.median(np.abs(surface.latency(calls[2].sol) / calls[2].latency - 1.0)))
    assert apes[0] < 0.02 and apes[1] > 0.04, apes


def test_a_prefill_at_head_dim_64_on_b200_is_bound_by_its_softmax_exponentials():
    b200, a100 = (Peaks.of(get_accelerator(kind)) for kind in ("B200", "A100-80G"))
    one = np.asarray([1.0])
    isl = np.asarray([4096.0])
    pairs = 32 * 4096 * 4096 / 2  # query-key pairs, one exponential each
    small_heads = context_attention_sol(b200, one, isl, (32, 8, 64))
    assert small_heads.seconds[0] == pytest.approx(pairs / (16 * 148 * 1.98e9))
    # at head dim 128 the tensor cores' FLOPs take longer than the exponentials
    for peaks in (b200, a100):
        wide = context_attention_sol(peaks, one, isl, (32, 8, 128))
        assert wide.seconds[0] == pytest.approx(2 * 32 * 128 * 4096**2 / peaks.flops_per_s)


def test_the_shipped_surfaces_load_and_round_trip(tmp_path: Path):
    shipped = default_transfer()
    assert set(shipped.surfaces) == set(FAMILIES)
    assert set(shipped.fitted_on) == {"A100-80G", "B200", "H100-SXM", "L40S"}
    path = tmp_path / "transfer.yaml"
    save_transfer(shipped, path, command="test")
    import yaml

    raw = yaml.safe_load(path.read_text())
    again = TransferModel.from_dict(raw)
    for family in FAMILIES:
        assert np.allclose(again.surfaces[family].values, shipped.surfaces[family].values)
    assert again.gemm_columns and again.gemm_columns.keys() == shipped.gemm_columns.keys()
    older = TransferModel.from_dict({k: v for k, v in raw.items() if k != "gemm_column_effects"})
    assert not older.gemm_columns  # a file from before the column effects still loads
    with pytest.raises(InputError, match="sol_clock"):  # surfaces fitted on SOL in seconds
        TransferModel.from_dict({k: v for k, v in raw.items() if k != "sol_clock"})


@needs_profiles
def test_the_shipped_surfaces_are_a_refit_of_the_profiles():
    calls = {
        kind: observations(get_accelerator(kind), load_profile(get_accelerator(kind).profile or ""))
        for kind in ("A100-80G", "B200", "H100-SXM", "L40S")
    }
    refit = fit_transfer(calls)
    for family in FAMILIES:
        assert np.allclose(
            refit.surfaces[family].values, default_transfer().surfaces[family].values, atol=1e-3
        )
    shipped = default_transfer().gemm_columns
    assert refit.gemm_columns.keys() == shipped.keys()
    assert max(abs(v - shipped[c]) for c, v in refit.gemm_columns.items()) < 1e-3
    # A100's MoE tables are skewed routing only: reported, not fitted
    a100 = calls["A100-80G"]["moe"]
    assert a100.skewed is not None and a100.skewed.all()
    h100 = calls["H100-SXM"]["moe"]
    assert h100.skewed is not None and 0 < h100.skewed.mean() < 0.1  # a few shapes lack balanced


def test_a_datasheet_gemm_carries_its_column_effect():
    h200, model = get_accelerator("H200"), get_model("llama-3-8b")
    shipped = default_transfer()
    profile = synthetic_profile(h200, model, 1, shipped)
    plain = synthetic_profile(
        h200, model, 1, TransferModel(surfaces=shipped.surfaces, fitted_on=shipped.fitted_on)
    )
    ratios = {nk: profile.gemm[nk].ys[0] / plain.gemm[nk].ys[0] for nk in profile.gemm}
    assert any(abs(np.log(r)) > 1e-3 for r in ratios.values())
    for (n, k), r in ratios.items():
        assert np.log(r) == pytest.approx(shipped.column_effect(n, k), abs=1e-9)


def test_a_datasheet_gives_every_table_a_model_needs():
    h200, model = get_accelerator("H200"), get_model("mixtral-8x7b")
    profile = synthetic_profile(h200, model, 2, default_transfer())
    assert profile.all_reduce and profile.moe and profile.context_attention
    assert "all-reduce" in profile.predicted and "MoE experts" in profile.predicted
    cm = ProfiledCostModel(h200, model, 2, profile=profile)
    assert cm.iteration_s([(2048, 0)], 16, 16 * 1000) > cm.iteration_s([], 16, 16 * 1000) > 0


@needs_profiles
def test_a_gpu_with_partial_tables_keeps_what_it_measured():
    l40s, model = get_accelerator("L40S"), get_model("llama-3-8b")
    mixed = RooflineCostModel(l40s, model, 2, measured=load_profile("l40s"))
    assert mixed.predicted == ("all-reduce",)
    datasheet = RooflineCostModel(l40s, model, 2)
    assert datasheet.predicted[0].startswith("GEMM")
    # the measured GEMMs are the profiled model's: the datasheet-only model differs
    profiled = ProfiledCostModel(l40s, model, 1)
    mixed_tp1 = RooflineCostModel(l40s, model, 1, measured=load_profile("l40s"))
    assert mixed_tp1.linear_s(512) == pytest.approx(profiled.linear_s(512), rel=1e-9)


@needs_profiles
@pytest.mark.parametrize(
    ("kind", "model", "tp"), [("H100-SXM", "llama-3-8b", 1), ("B200", "llama-2-70b", 4)]
)
def test_datasheet_timings_of_a_profiled_gpu_are_close_to_its_tables(kind, model, tp):
    acc, arch = get_accelerator(kind), get_model(model)
    profiled, datasheet = ProfiledCostModel(acc, arch, tp), RooflineCostModel(acc, arch, tp)
    for scenario in (([], 32, 32 * 2000), ([(2048, 0)], 0, 0), ([(512, 4096)], 64, 64000)):
        ratio = datasheet.iteration_s(*scenario) / profiled.iteration_s(*scenario)
        assert 0.7 < ratio < 1.4, scenario


@needs_profiles
def test_fused_moe_calls_of_a_gpu_left_out_are_closer_with_their_own_family():
    calls = {
        kind: observations(get_accelerator(kind), load_profile(get_accelerator(kind).profile or ""))
        for kind in ("A100-80G", "B200", "H100-SXM", "L40S")
    }
    held = calls.pop("A100-80G")
    moe = fit_surface("moe", [c["moe"] for c in calls.values()])
    gemm = fit_surface("gemm", [c["gemm"] for c in calls.values()])
    own_family = np.median(np.abs(moe.latency(held["moe"].sol) / held["moe"].latency - 1.0))
    as_gemm = np.median(np.abs(gemm.latency(held["moe"].sol) / held["moe"].latency - 1.0))
    assert own_family < 0.25 and own_family < as_gemm - 0.05  # 0.21 vs 0.30 measured


@needs_profiles
def test_a100_left_out_is_closer_with_launch_floors_in_cycles():
    """A100 (1.41 GHz) learned from B200, H100 and L40S (1.98–2.52 GHz): in seconds its small
    calls were predicted too fast (GEMM 0.205, decode attention 0.356 median APE)."""
    calls = {
        kind: observations(get_accelerator(kind), load_profile(get_accelerator(kind).profile or ""))
        for kind in ("A100-80G", "B200", "H100-SXM", "L40S")
    }
    held = calls.pop("A100-80G")
    for family, bound in (("gemm", 0.17), ("generation_attention", 0.25)):
        surface = fit_surface(family, [c[family] for c in calls.values()])
        ape = np.abs(surface.latency(held[family].sol) / held[family].latency - 1.0)
        assert np.median(ape) < bound, family  # 0.155 and 0.222 measured


@needs_profiles
def test_b200_left_out_is_closer_with_gemm_in_sm_cycles():
    """B200 (148 SMs) learned from A100, H100 and L40S (108–142): with every GPU taken at the
    same SM count its GEMMs were 0.150 median APE, on SM-cycles 0.126."""

    def calls(sm_counts: bool) -> dict[str, Observations]:
        out = {}
        for kind in ("A100-80G", "B200", "H100-SXM", "L40S"):
            acc = get_accelerator(kind)
            datasheet = acc if sm_counts else dataclasses.replace(acc, compute_units=None)
            out[kind] = observations(datasheet, load_profile(acc.profile or ""))["gemm"]
        return out

    apes = {}
    for sm_counts in (True, False):
        gemm = calls(sm_counts)
        held = gemm.pop("B200")
        surface, columns = fit_gemm(list(gemm.values()))
        model = TransferModel(surfaces={"gemm": surface}, fitted_on=(), gemm_columns=columns)
        apes[sm_counts] = np.median(np.abs(model.predict("gemm", held) / held.latency - 1.0))
    assert apes[True] < 0.135 and apes[True] < apes[False] - 0.015, apes


@needs_profiles
def test_b200_left_out_prefill_attention_within_target_with_the_softmax_bound():
    """B200's head-dim-64 prefills were predicted 1.6x too fast from A100, H100 and L40S (median
    APE 0.238): its tensor cores outrun its special-function units there; bounded, 0.141."""
    calls = {
        kind: observations(get_accelerator(kind), load_profile(get_accelerator(kind).profile or ""))
        for kind in ("A100-80G", "B200", "H100-SXM", "L40S")
    }
    held = calls.pop("B200")["context_attention"]
    surface = fit_surface("context_attention", [c["context_attention"] for c in calls.values()])
    assert np.median(np.abs(surface.latency(held.sol) / held.latency - 1.0)) < 0.15
