"""Accuracy of the engine cost model against request-level measurements of real engines.

Runs :func:`sim.costmodel.validate.validation_rows` (calibration on one half of each source,
APE on the other half only) and prints one row per (hardware, model, phase, source).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.report import print_table, write_json
from sim.costmodel.validate import validation_rows

COLUMNS = ("hardware", "model", "phase", "source", "median_ape", "p90_ape", "n", "calibration")


def run_cost_model_bench(out: Path | None = None) -> dict[str, Any]:
    """Compute the validation rows, print them, and write ``{"rows": [...]}`` to ``out``."""
    rows = [dict(row) for row in validation_rows()]
    print_table(
        "Cost model vs measured latency (held-out halves; APE as a fraction)", rows, COLUMNS
    )
    payload: dict[str, Any] = {"rows": rows}
    if out is not None:
        write_json(out, payload)
    return payload
