"""Accuracy of the engine cost model: against measurements, and on accelerators it never saw.

Prints and writes (``--out``):

- ``rows``: held-out accuracy against request-level measurements. The rows marked
  ``"default": true`` are the view the simulator uses by default
  (:func:`sim.costmodel.measured.default_view_rows`: kernel times from the accelerator's tables,
  or its datasheet when it has none, under its serving stack calibrated on held-in runs only);
  the others are the earlier views of :func:`sim.costmodel.validate.validation_report`.
- ``leave_one_out``: per profiled accelerator left out and operator family, the datasheet
  fallback's median APE on its tables and the capacity-at-SLO error (:mod:`bench.transfer`);
  ``leave_one_out_capacity`` lists every capacity case.
- ``datasheet_handful``: each profiled accelerator with end-to-end measurements treated as a
  datasheet-only one (kernels learned on the other profiled GPUs, its stack fitted on the
  handful datasheet accelerators use): the end-to-end error that rule gives on hardware whose
  rows chose nothing (:func:`bench.transfer.datasheet_handful`);
- ``timing_sources``: where each catalogue accelerator's timings come from and the expected
  error of that source; ``fidelity``: those expected errors as measured here.

``--update-catalogue`` rewrites ``data/catalogue/{transfer,calibrations,fidelity}.yaml`` from
this run (the surfaces fitted on every profiled accelerator, the calibrations fitted on the
held-in runs, the expected errors measured on the held-out ones), but for the shared serving
stacks (``calibrations: shared:``), which stay as shipped unless ``refit_serving_stacks``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from bench.transfer import datasheet_handful, leave_one_out, profiled_set
from placement.domain.accelerators import CATALOGUE, Accelerator
from placement.report import print_table, write_json
from sim.costmodel.measured import (
    DEFAULT_FRAMEWORK,
    SHARED,
    HeldOut,
    calibrations_path,
    default_view_rows,
    frameworks,
    has_profile,
    held_out_runs,
    save_calibrations,
)
from sim.costmodel.sources import accelerator_source, fidelity_path
from sim.costmodel.transfer import fit_transfer, save_transfer, transfer_path
from sim.costmodel.validate import validation_report

COMMAND = "placement bench cost-model --out bench/results/cost_model.json --update-catalogue"
COLUMNS = (
    "view",
    "hardware",
    "model",
    "phase",
    "source",
    "median_ape",
    "p90_ape",
    "n",
    "calibration",
)
DEFAULT_COLUMNS = (
    "hardware",
    "framework",
    "model",
    "phase",
    "source",
    "timing_source",
    "median_ape",
    "p90_ape",
    "n",
    "median_ape_no_fit",
)
HANDFUL_COLUMNS = (
    "accelerator",
    "framework",
    "n",
    "median_ape",
    "median_ape_no_fit",
    "fitted_on",
    "kernels_fitted_on",
)
LOO_COLUMNS = ("accelerator", "family", "rows", "median_ape", "p90_ape", "n", "capacity_error")
CAPACITY_COLUMNS = (
    "accelerator",
    "model",
    "tp",
    "mix",
    "capacity_profiles_rps",
    "capacity_transferred_rps",
    "capacity_error",
    "capacity_error_constant_roofline",
)
STACK_COLUMNS = (
    "fitted_on",
    "reported_on",
    "n_fit",
    "host_overhead_ms",
    "all_reduce_hop_latency_us",
    "compute_factor",
    "prefill_sequence_ms",
    "fit_median_ape",
)
SOURCE_COLUMNS = ("accelerator", "source", "expected_error", "detail")
QUICK_LEAVE_OUT = ("B200",)
QUICK_MEASURED = ("GH200",)


def _stack_line(fold: dict[str, Any]) -> dict[str, Any]:
    """A fold in display units (ms, µs) with its in-sample APE as one short string."""
    in_sample = ", ".join(f"{k} {v:.3f}" for k, v in fold["fit_median_ape"].items())
    return {
        "fitted_on": fold["fitted_on"],
        "reported_on": fold["reported_on"],
        "n_fit": fold["n_fit"],
        "host_overhead_ms": fold["host_overhead_s"] * 1e3,
        "all_reduce_hop_latency_us": fold["all_reduce_hop_latency_s"] * 1e6,
        "compute_factor": fold["compute_factor"],
        "prefill_sequence_ms": fold["prefill_sequence_s"] * 1e3,
        "fit_median_ape": in_sample,
    }


def timing_source_rows() -> list[dict[str, Any]]:
    """Every catalogue accelerator: where its timings come from and that source's error."""
    return [accelerator_source(CATALOGUE[kind]).as_dict() for kind in sorted(CATALOGUE)]


def _default_framework(accelerator: Accelerator) -> str:
    names = frameworks(accelerator)
    return DEFAULT_FRAMEWORK if DEFAULT_FRAMEWORK in names or not names else names[0]


def fidelity(
    held_out: Sequence[HeldOut], loo_rows: Sequence[dict[str, Any]]
) -> dict[str, dict[str, Any]]:
    """Expected median error of each timing source, pooled over held-out runs of the
    accelerators' default stacks; the datasheet-only source also shows its operator-level
    leave-one-out figures."""

    def pooled(values: list[float]) -> float | None:
        return float(np.median(values)) if values else None

    default = [
        h for h in held_out if h.run.framework == _default_framework(CATALOGUE[h.run.hardware])
    ]
    profiled = [h.ape for h in default if h.timing_source == "profiles"]
    datasheet = [h for h in default if h.timing_source == "end-to-end fit"]
    shapes = [r for r in loo_rows if r["rows"] == "model shapes"]
    per_family = {
        f: float(np.median([r["median_ape"] for r in shapes if r["family"] == f]))
        for f in sorted({r["family"] for r in shapes})
    }
    capacity = [r["capacity_error"] for r in loo_rows if r["capacity_error"] is not None]
    hardware = sorted({h.run.hardware for h in datasheet})
    return {
        "profiles": {
            "median_ape": pooled(profiled),
            "n": len(profiled),
            "what": "end-to-end latency of the held-out runs (batch 32/64) of the profiled "
            "accelerators' default stack (vLLM), kernels from their tables under the stack "
            "calibrated on their batch <= 16 runs",
        },
        "end-to-end fit": {
            "median_ape": pooled([h.ape for h in datasheet]),
            "n": len(datasheet),
            "what": "end-to-end latency of every run but a handful on "
            + ", ".join(hardware)
            + ": datasheet kernels under the stack calibrated on that handful",
        },
        "roofline only": {
            "median_ape": pooled([h.ape_no_fit for h in datasheet]),
            "n": len(datasheet),
            "what": "the same runs from the datasheet alone (no fit); operators of a profiled "
            "accelerator left out: median APE "
            + ", ".join(f"{f} {v:.2f}" for f, v in sorted(per_family.items()))
            + (f"; capacity at SLO {float(np.median(capacity)):.2f}" if capacity else ""),
        },
    }


def write_fidelity(figures: dict[str, dict[str, Any]], path: Path) -> None:
    header = (
        "# Expected median error of each timing source (sim/costmodel/sources.py), measured on\n"
        f"# held-out runs. Written by: {COMMAND}\n"
    )
    rounded = {
        k: {**v, "median_ape": None if v["median_ape"] is None else round(v["median_ape"], 4)}
        for k, v in figures.items()
    }
    path.write_text(header + yaml.safe_dump({"sources": rounded}, sort_keys=False, width=100))


def run_cost_model_bench(
    out: Path | None = None,
    *,
    quick: bool = False,
    update_catalogue: bool = False,
    refit_serving_stacks: bool = False,
) -> dict[str, Any]:
    """Compute every view, print it, write it as JSON to ``out`` (and the catalogue files)."""
    accelerators = [CATALOGUE[k] for k in sorted(CATALOGUE)]
    measured = [a for a in accelerators if a.measurements]
    if quick:
        measured = [a for a in measured if a.kind in QUICK_MEASURED]
    held_out, calibrations = held_out_runs(measured)
    default_rows = default_view_rows(held_out, calibrations)
    print_table(
        "Default view: held-out runs under the simulator's default cost model (APE as a "
        "fraction; no_fit: kernels + vLLM overhead only)",
        default_rows,
        DEFAULT_COLUMNS,
    )
    report = validation_report()
    rows = [{**dict(row), "default": False} for row in report["rows"]]
    folds = [dict(fold) for fold in report["stack_calibrations"]]
    if rows:
        print_table("Earlier views (held-out rows only)", rows, COLUMNS)
        print_table(
            "Serving-stack calibration per cross-hardware fold (Splitwise; in-sample APE)",
            [_stack_line(fold) for fold in folds],
            STACK_COLUMNS,
        )
    profiled = profiled_set(accelerators)
    held_profiled = [p for p in profiled if not quick or p.accelerator.kind in QUICK_LEAVE_OUT]
    loo = leave_one_out(profiled, held_out=[p.accelerator.kind for p in held_profiled])
    print_table(
        "Leave one accelerator out: datasheet fallback learned on the other profiled GPUs",
        loo.rows,
        LOO_COLUMNS,
    )
    print_table("Capacity at SLO, left-out accelerator", loo.capacity, CAPACITY_COLUMNS)
    pseudo = datasheet_handful(profiled, held_out=[p.accelerator.kind for p in held_profiled])
    print_table(
        "Profiled GPUs as datasheet-only ones: transferred kernels + a handful, other runs",
        pseudo,
        HANDFUL_COLUMNS,
    )
    figures = fidelity(held_out, loo.rows)
    if update_catalogue and not quick:
        save_transfer(
            fit_transfer({p.accelerator.kind: p.calls for p in profiled}),
            transfer_path(),
            command=COMMAND,
        )
        # the shared serving stacks fix the simulator's default A100/H100 timings, which every
        # loop and routing figure and the predictor tests stand on: refitted only when asked
        keep = () if refit_serving_stacks else (SHARED,)
        save_calibrations(calibrations, calibrations_path(), command=COMMAND, keep=keep)
        write_fidelity(figures, fidelity_path())
    sources = timing_source_rows()
    print_table(
        "Where each accelerator's timings come from (expected median error, held out)",
        sources,
        SOURCE_COLUMNS,
    )
    payload: dict[str, Any] = {
        "rows": default_rows + rows,
        "stack_calibrations": folds,
        "calibrations": [
            {"accelerator": c.accelerator, "framework": c.framework, **c.to_dict()}
            for c in calibrations
        ],
        "leave_one_out": loo.rows,
        "leave_one_out_capacity": loo.capacity,
        "datasheet_handful": pseudo,
        "fidelity": figures,
        "timing_sources": sources,
        "datasheet_only": [a.kind for a in measured if not has_profile(a)],
    }
    if out is not None:
        write_json(out, payload)
    return payload
