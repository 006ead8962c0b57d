"""Predictor speed: p50/p95 TTFT and TPOT for a batch of 10,000 rows (target ≤ 50 ms).

The predictor is loaded from ``--model DIR`` (a :meth:`LatencyPredictor.save` directory) or,
without it, fitted on telemetry of short simulator runs (:func:`simulated_frame`: synthetic
traffic on the heterogeneous fleet at loads 0.5 and 1.0). The rows are those runs' requests,
repeated to the asked count. Only ``predict`` is timed (features, prior, four boosters): the
median and 90th percentile of ``repeats`` calls after one warm-up call.
"""

from __future__ import annotations

import statistics
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from models.predictor import LatencyPredictor
from placement.domain.fleet import Fleet, load_fleet
from placement.paths import repo_root
from placement.report import print_table, write_json
from sim.capacity import rate_for_load
from sim.costmodel.factory import cost_model_for_replica
from sim.workloads.registry import load_workload
from training.dataset import build_training_frame
from training.telemetry.simulated import DEFAULT_START, simulate_for_telemetry, telemetry_frames

TARGET_MS = 50.0
# seconds of trace used to estimate the arrival-rate multiplier of a load before the real run
_PROBE_S = 300.0


def simulated_frame(
    fleet: Fleet,
    workload: str,
    *,
    load: float,
    span_s: float,
    seed: int = 0,
    policy: str = "least_outstanding",
    sample_interval_s: float = 1.0,
    start: datetime = DEFAULT_START,
) -> pd.DataFrame:
    """The training frame of one simulator run: ``workload`` offered at ``load`` × the fleet's
    nominal capacity for about ``span_s`` simulated seconds of arrivals (a recorded trace gives
    at most its own length), replicas sampled every ``sample_interval_s``."""
    probe = load_workload(workload, seed=seed, duration_s=_PROBE_S)
    rate = rate_for_load(load, fleet, probe, cost_model_for_replica)
    trace = load_workload(workload, seed=seed, duration_s=span_s * rate)
    result = simulate_for_telemetry(
        trace,
        fleet,
        load=load,
        policy=policy,
        sample_interval_s=sample_interval_s,
        seed=seed,
    )
    requests, samples = telemetry_frames(result, start=start)
    return build_training_frame(requests, samples)


def default_training_frame(seed: int = 0) -> pd.DataFrame:
    """Telemetry of two short runs on the heterogeneous fleet (loads 0.5 and 1.0)."""
    fleet = load_fleet(repo_root() / "data" / "fleets" / "hetero.yaml")
    frames = [
        simulated_frame(fleet, "synthetic", load=load, span_s=120.0, seed=seed + i)
        for i, load in enumerate((0.5, 1.0))
    ]
    frame = pd.concat(frames, ignore_index=True)
    return frame.sort_values("arrival_time", kind="stable", ignore_index=True)


def _rows(frame: pd.DataFrame, n: int) -> pd.DataFrame:
    reps = -(-n // max(len(frame), 1))
    return pd.concat([frame] * reps, ignore_index=True).iloc[:n].reset_index(drop=True)


def run_predict_speed(
    *,
    rows: int = 10_000,
    repeats: int = 30,
    model_dir: Path | None = None,
    seed: int = 0,
    out: Path | None = None,
) -> dict[str, Any]:
    """Time ``LatencyPredictor.predict`` on ``rows`` rows; print the table, write JSON."""
    loaded = LatencyPredictor.load(model_dir) if model_dir is not None else None
    frame = default_training_frame(seed)
    predictor = loaded or LatencyPredictor().fit(frame)
    source = str(model_dir) if loaded is not None else "fitted on simulated telemetry"
    batch = _rows(frame, rows)
    predictor.predict(batch)  # warm-up
    times_ms: list[float] = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        predictor.predict(batch)
        times_ms.append((time.perf_counter() - t0) * 1e3)
    payload: dict[str, Any] = {
        "rows": rows,
        "median_ms": statistics.median(times_ms),
        "p90_ms": float(np.percentile(times_ms, 90)),
        "repeats": repeats,
        "target_ms": TARGET_MS,
        "model": source,
        "trees": {name: m.booster.num_trees() for name, m in predictor.models.items()},
    }
    print_table(
        f"predict speed: {rows:,} rows, median of {repeats} (target ≤ {TARGET_MS:.0f} ms)",
        [payload],
        ("rows", "median_ms", "p90_ms", "repeats"),
    )
    if out is not None:
        write_json(out, payload)
    return payload
