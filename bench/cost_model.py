"""Accuracy of the engine cost model against request-level measurements of real engines.

Runs :func:`sim.costmodel.validate.validation_report` and prints one row per (view, hardware,
model, phase, source), APE over held-out cases only, then the serving-stack parameters fitted in
each cross-hardware fold. Writes ``{"rows": [...], "stack_calibrations": [...]}``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from placement.domain.accelerators import CATALOGUE
from placement.report import print_table, write_json
from sim.costmodel.sources import accelerator_source
from sim.costmodel.validate import validation_report

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


def timing_source_rows() -> list[dict[str, Any]]:
    """Every catalogue accelerator: where its timings come from and that source's error."""
    return [accelerator_source(CATALOGUE[kind]).as_dict() for kind in sorted(CATALOGUE)]


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


def run_cost_model_bench(out: Path | None = None) -> dict[str, Any]:
    """Compute the validation report, print it, and write it as JSON to ``out``."""
    report = validation_report()
    rows = [dict(row) for row in report["rows"]]
    folds = [dict(fold) for fold in report["stack_calibrations"]]
    print_table(
        "Cost model vs measured latency (held-out rows only; APE as a fraction)", rows, COLUMNS
    )
    print_table(
        "Serving-stack calibration per cross-hardware fold (Splitwise; in-sample APE on fit rows)",
        [_stack_line(fold) for fold in folds],
        STACK_COLUMNS,
    )
    sources = timing_source_rows()
    print_table(
        "Where each accelerator's timings come from (expected median error, held out)",
        sources,
        SOURCE_COLUMNS,
    )
    payload: dict[str, Any] = {
        "rows": rows,
        "stack_calibrations": folds,
        "timing_sources": sources,
    }
    if out is not None:
        write_json(out, payload)
    return payload
