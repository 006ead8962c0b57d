"""Leave one accelerator out: how well the datasheet fallback predicts a GPU it never saw.

For each profiled accelerator in turn, the utilization surfaces of
:mod:`sim.costmodel.transfer` are fitted on the operator tables of the *other* profiled
accelerators only, and the one left out is predicted from its datasheet alone:

- per operator family, the APE of every measured call of its tables (``rows: all``) and of the
  calls the cost model reads for the catalogue's models (``rows: model shapes``: the GEMM columns
  bracketing their per-GPU shapes at TP 1/2/4/8, their per-GPU attention head shapes, every
  all-reduce);
- capacity at SLO (:func:`models.capacity.capacity_at_slo`, the prior baseline) of replica kinds
  its tables cover, with the datasheet cost model against its own measured tables:
  ``capacity_error`` = transferred / profiled − 1 (median of the absolute values over kinds and
  mixes; every case is listed). For reference, the same capacity from the constant-efficiency
  roofline the project used before (fitted on all four, so not even held out).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from models.capacity import Slo, WorkloadMix, capacity_at_slo
from models.roofline_prior import ReplicaKind
from placement.domain.accelerators import Accelerator
from placement.domain.fleet import DEFAULT_GPU_MEMORY_UTILIZATION, kv_capacity_tokens
from placement.domain.llm import CATALOGUE as MODELS
from placement.domain.llm import ModelArchitecture, get_model
from placement.errors import ProfileUnavailable
from sim.costmodel.base import IterationCostModel
from sim.costmodel.interpolate import FloatArray
from sim.costmodel.measured import (
    DATASHEET_FREE,
    Case,
    fit_handful,
    frameworks,
    handful,
    measured_runs,
    run_kv_tokens,
)
from sim.costmodel.operators import shard_shapes
from sim.costmodel.profiled import FRAMEWORK_OVERHEAD_S, ProfiledCostModel
from sim.costmodel.profiles import OperatorProfile, load_profile
from sim.costmodel.replay import kernel_tp, predictor
from sim.costmodel.roofline import FITTED_EFFICIENCY, RooflineCostModel
from sim.costmodel.stack import StackCalibration, stack_sensitivities
from sim.costmodel.transfer import (
    FAMILIES,
    Family,
    Observations,
    TransferModel,
    fit_transfer,
    observations,
)

CAPACITY_KINDS: tuple[tuple[str, int], ...] = (
    ("llama-3-8b", 1),
    ("qwen2.5-32b", 2),
    ("llama-2-70b", 4),
    ("mixtral-8x7b", 2),
)
CAPACITY_MIXES: tuple[tuple[str, WorkloadMix], ...] = (
    ("chat", WorkloadMix(mean_input_tokens=1024, output_tokens=256)),
    ("long prompt", WorkloadMix(mean_input_tokens=3072, output_tokens=128)),
)
CAPACITY_SLO = Slo(2.0, 0.1)  # the interactive class
TP_RANGE = (1, 2, 4, 8)
MIN_KV_TOKENS = 16 * 1024  # as a fleet file requires


@dataclass(frozen=True, slots=True, kw_only=True)
class Profiled:
    """One profiled accelerator: its datasheet, tables and measured calls per family."""

    accelerator: Accelerator
    profile: OperatorProfile
    calls: dict[Family, Observations]


def profiled_set(accelerators: Sequence[Accelerator]) -> list[Profiled]:
    out: list[Profiled] = []
    for a in accelerators:
        if a.profile is None:
            continue
        try:
            profile = load_profile(a.profile)
        except ProfileUnavailable:
            continue
        out.append(Profiled(accelerator=a, profile=profile, calls=observations(a, profile)))
    return out


def _model_shape_masks(target: Profiled) -> dict[Family, FloatArray]:
    """Per family, which of ``target``'s calls the cost model reads for catalogue models."""
    p = target.profile
    columns: set[tuple[int, int]] = set()
    heads: set[tuple[int, int, int]] = set()
    moe_keys: set[tuple[int, int, int, int, int]] = set()
    for model in MODELS.values():
        if model.pooling:  # a pooling model reads no decode-serving kernels
            continue
        for tp in TP_RANGE:
            try:
                shapes = shard_shapes(model, tp)
            except Exception:
                continue
            heads.add(shapes.head_key)
            if shapes.moe is not None:
                moe_keys.add(shapes.moe.key)
            for g in (*shapes.layer_gemms, shapes.lm_head):
                ns = _bracket(p.gemm_ns, g.n)
                ks = _bracket(p.gemm_ks, g.k)
                columns |= {(n, k) for n in ns for k in ks}
    gemm = [
        (n, k) in columns for (n, k), c in p.gemm.items() for _ in c.xs
    ]  # same order as observations()
    out: dict[Family, FloatArray] = {"gemm": np.asarray(gemm, dtype=bool)}
    for family, table in (
        ("context_attention", p.context_attention),
        ("generation_attention", p.generation_attention),
    ):
        mask = [
            head in heads for head, curves in table.items() for c in curves.values() for _ in c.xs
        ]
        out[family] = np.asarray(mask, dtype=bool)  # type: ignore[index]
    out["communication"] = np.ones(sum(len(c.xs) for c in p.all_reduce.values()), dtype=bool)
    out["moe"] = np.asarray(
        [key in moe_keys for key, c in p.moe.items() for _ in c.xs], dtype=bool
    )  # same order as observations()
    return out


def _bracket(grid: tuple[int, ...], value: int) -> set[int]:
    if not grid:
        return set()
    if value >= grid[-1]:
        return {grid[-1]}
    if value <= grid[0]:
        return {grid[0]}
    i = int(np.searchsorted(grid, value))
    return {grid[i]} if grid[i] == value else {grid[i - 1], grid[i]}


def _apes(model: TransferModel, family: Family, calls: Observations) -> FloatArray:
    predicted = model.predict(family, calls)
    return np.asarray(np.abs(predicted / calls.latency - 1.0), dtype=np.float64)


def _subset(calls: Observations, mask: FloatArray) -> Observations:
    return calls.select(mask)


def _fits(accelerator: Accelerator, model: ModelArchitecture, tp: int) -> bool:
    kv = kv_capacity_tokens(accelerator, model, tp, DEFAULT_GPU_MEMORY_UTILIZATION)
    return kv >= MIN_KV_TOKENS


def capacity_cases(
    accelerator: Accelerator, transferred: Callable[[ModelArchitecture, int], IterationCostModel]
) -> list[dict[str, Any]]:
    """Capacity at SLO with the accelerator's own tables and with ``transferred`` timings."""
    cases: list[dict[str, Any]] = []
    for name, tp in CAPACITY_KINDS:
        model = get_model(name)
        if not _fits(accelerator, model, tp):
            continue
        try:
            own = ProfiledCostModel(accelerator, model, tp)
        except ProfileUnavailable:
            continue
        other = transferred(model, tp)
        before = RooflineCostModel(accelerator, model, tp, efficiency=FITTED_EFFICIENCY)
        for mix_name, mix in CAPACITY_MIXES:
            rates = {
                label: capacity_at_slo(ReplicaKind(accelerator, model, tp, cm), mix, CAPACITY_SLO)
                for label, cm in (("profiles", own), ("transferred", other), ("before", before))
            }
            base = rates["profiles"]
            cases.append(
                {
                    "accelerator": accelerator.kind,
                    "model": name,
                    "tp": tp,
                    "mix": mix_name,
                    "capacity_profiles_rps": base,
                    "capacity_transferred_rps": rates["transferred"],
                    "capacity_error": rates["transferred"] / base - 1.0 if base > 0 else None,
                    "capacity_error_constant_roofline": rates["before"] / base - 1.0
                    if base > 0
                    else None,
                }
            )
    return cases


def _transferred(
    accelerator: Accelerator, transfer: TransferModel, model: ModelArchitecture, tp: int
) -> IterationCostModel:
    return RooflineCostModel(accelerator, model, tp, transfer=transfer, reason="left out")


def _median_abs(values: Sequence[float | None]) -> float | None:
    kept = [abs(v) for v in values if v is not None]
    return float(np.median(kept)) if kept else None


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaveOneOut:
    rows: list[dict[str, Any]]
    capacity: list[dict[str, Any]]


def leave_one_out(
    profiled: Sequence[Profiled], *, held_out: Sequence[str] | None = None
) -> LeaveOneOut:
    """Fit on all but one profiled accelerator, report on the one left out, for each in turn
    (or for those named in ``held_out``)."""
    rows: list[dict[str, Any]] = []
    capacity: list[dict[str, Any]] = []
    for held in profiled:
        if held_out is not None and held.accelerator.kind not in held_out:
            continue
        training = {p.accelerator.kind: p.calls for p in profiled if p is not held}
        model = fit_transfer(training)
        cases = capacity_cases(held.accelerator, partial(_transferred, held.accelerator, model))
        capacity += cases
        cap_error = _median_abs([c["capacity_error"] for c in cases])
        masks = _model_shape_masks(held)
        for family in FAMILIES:
            calls = held.calls.get(family)
            if calls is None:
                continue
            for subset, mask in (("all", None), ("model shapes", masks[family])):
                chosen = calls if mask is None else _subset(calls, mask)
                if not len(chosen.latency):
                    continue
                apes = _apes(model, family, chosen)
                rows.append(
                    {
                        "accelerator": held.accelerator.kind,
                        "family": family,
                        "rows": subset,
                        "median_ape": float(np.median(apes)),
                        "p90_ape": float(np.quantile(apes, 0.9)),
                        "n": len(apes),
                        "capacity_error": cap_error,
                        "fitted_on": ", ".join(sorted(training)),
                    }
                )
    return LeaveOneOut(rows=rows, capacity=capacity)


def datasheet_handful(
    profiled: Sequence[Profiled],
    *,
    held_out: Sequence[str] | None = None,
    frameworks_kept: Sequence[str] | None = None,
) -> list[dict[str, Any]]:
    """A profiled GPU treated as one known by its datasheet only: kernel times from the surfaces
    fitted on the *other* profiled GPUs, its serving stack fitted on a handful
    (:func:`sim.costmodel.measured.handful`, the rule datasheet accelerators use) of its
    LLM-Inference-Bench runs, median APE on all its other runs (and with no fit)."""
    rows: list[dict[str, Any]] = []
    for held in profiled:
        kind = held.accelerator.kind
        if (held_out is not None and kind not in held_out) or not held.accelerator.measurements:
            continue
        model = fit_transfer({p.accelerator.kind: p.calls for p in profiled if p is not held})
        runs = [r for r in measured_runs(held.accelerator) if r.source == "llm_inference_bench"]
        for framework in frameworks(held.accelerator):
            mine = [r for r in runs if r.framework == framework]
            if not mine or (frameworks_kept is not None and framework not in frameworks_kept):
                continue
            cases: list[Case] = []
            for run in mine:
                base = RooflineCostModel(
                    held.accelerator,
                    get_model(run.model),
                    kernel_tp(run),
                    transfer=model,
                    reason="left out",
                )
                base_s, terms = stack_sensitivities(
                    base, predictor(run, run_kv_tokens(held.accelerator, run))
                )
                cases.append(Case(run=run, base_s=base_s, terms=terms))
            chosen = handful(mine)
            stack, what = fit_handful([c for c in cases if c.run in chosen], DATASHEET_FREE)
            no_fit = StackCalibration(host_overhead_s=FRAMEWORK_OVERHEAD_S)
            rest = [c for c in cases if c.run not in chosen]
            rows.append(
                {
                    "accelerator": kind,
                    "framework": framework,
                    "n": len(rest),
                    "median_ape": float(
                        np.median([abs(c.predicted_s(stack) / c.run.measured_s - 1) for c in rest])
                    ),
                    "median_ape_no_fit": float(
                        np.median([abs(c.predicted_s(no_fit) / c.run.measured_s - 1) for c in rest])
                    ),
                    "fitted_on": f"{what}: {len(chosen)} runs",
                    "kernels_fitted_on": ", ".join(model.fitted_on),
                }
            )
    return rows
