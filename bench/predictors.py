"""Accuracy of the latency/throughput predictors on simulator telemetry and on Splitwise.

Telemetry: every (fleet, workload, load) run of the simulator is cut in time, its first 70%
to train and its last 30% held out; the parts are pooled (so every load and fleet is on both
sides, and no held-out request is older than a training one of the same run). Splits reported:

* ``heldout`` — the pooled later 30%: TTFT/TPOT p50 MAPE (quantile 0.5), p95 coverage
  (quantile 0.95), throughput MAPE (generation tokens/s of busy replicas);
* ``splitwise`` — real measurements, Llama-2-70B TP2/4/8 on A100/H100
  (:func:`training.measurements.splitwise_frame`): the rows of prompt sizes
  :data:`SPLITWISE_HELDOUT_PROMPTS` are held out; the other sizes join training as measured
  rows. Scored as TTFT p50 vs ``prompt_time`` and TPOT p50 vs ``token_time``;
* ``splitwise:cross_hardware:<accelerator>`` — trained with the other GPU's Splitwise rows only,
  scored on every row of this one: does a serving stack measured on one GPU transfer?
* ``splitwise:sim_only`` — trained on simulator telemetry alone, scored on every Splitwise row:
  the simulator's cost model is itself 0.27–0.40 off Splitwise, so this measures transfer;
* ``leave_out:<accelerator>`` — trained without that accelerator's rows (telemetry and
  measurements), scored on all of its telemetry rows.

Every row carries the mean (``mape``) and the median (``median_ape``) absolute percentage
error of the p50 and the coverage of the p95.

``buckets`` breaks the held-out split down where admission decisions are made: by prompt
length (:data:`PROMPT_BUCKETS`), by the router's requests in flight on the replica at routing
(:data:`IN_FLIGHT_BUCKETS`) and by the run's offered load, with the row count of each, so a
bucket's figure is only read where it has rows (targets apply from :data:`MIN_BUCKET_ROWS`).
To say where the error comes from it also breaks it down by output length
(:data:`OUTPUT_BUCKETS`: a longer decode sees more requests arrive after it was routed), by
accelerator and by workload. ``bucket_misses`` lists every bucket with at least
:data:`MIN_BUCKET_ROWS` rows whose p50 median APE exceeds :data:`BUCKET_MEDIAN_APE` or whose p95
coverage lies outside :data:`COVERAGE_BAND`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from models.predictor import LatencyPredictor
from models.quantile import TARGETS, QuantileConfig
from placement.errors import InputError
from placement.paths import repo_root
from placement.report import print_table, write_json
from training.measurements import splitwise_frame
from training.train import throughput_mape

COLUMNS = ("target", "quantile", "split", "mape", "median_ape", "coverage", "n")
BUCKET_COLUMNS = ("target", "by", "bucket", "mape", "median_ape", "coverage", "n")
# prompt tokens: [lo, hi)
PROMPT_BUCKETS: dict[str, tuple[float, float]] = {
    "<4k": (0, 4096),
    "4-16k": (4096, 16384),
    "16-32k": (16384, 32768),
    ">=32k": (32768, float("inf")),
}
# the router's requests in flight on the replica when it routes (backlog_requests): [lo, hi]
IN_FLIGHT_BUCKETS: dict[str, tuple[float, float]] = {
    "0": (0, 0),
    "1-3": (1, 3),
    "4-7": (4, 7),
    "8+": (8, float("inf")),
}
# output tokens: [lo, hi)
OUTPUT_BUCKETS: dict[str, tuple[float, float]] = {
    "<64": (0, 64),
    "64-256": (64, 256),
    "256-1k": (256, 1024),
    ">=1k": (1024, float("inf")),
}
MIN_BUCKET_ROWS = 200
BUCKET_MEDIAN_APE = 0.15
COVERAGE_BAND = (0.93, 0.97)
# alternate sizes of Splitwise's 128…8192 sweep: the held-out ones lie between trained ones
SPLITWISE_HELDOUT_PROMPTS = (256, 1024, 4096)
LEAVE_OUT = ("A100-80G", "L40S")
TRAIN_FRACTION = 0.7


@dataclass(frozen=True, slots=True, kw_only=True)
class PredictorBench:
    """Which simulator runs make the telemetry.

    ``trailing_share``: traffic simulated after each run's window of ``duration_s``, as a share
    of it, neither trained on nor scored. Without it the trace simply stops, and the latest
    requests — the reported ones — decode on a replica that no new request reaches: their TPOT
    falls well below anything a deployment sees (on 2026-11-26, 28% of the held-out rows were
    still decoding when the arrivals ended, and they made 0.11 of the 0.18 TPOT MAPE).
    """

    fleets: tuple[str, ...] = ("h100x8", "hetero")
    workloads: tuple[str, ...] = ("mooncake", "synthetic")
    loads: tuple[float, ...] = (0.3, 0.7, 1.0, 1.3)
    duration_s: float = 150.0
    trailing_share: float = 0.5
    seed: int = 0
    # the predictors' settings (the floor's variants ignore the features they ignore)
    predictor: QuantileConfig = field(default_factory=QuantileConfig)

    @classmethod
    def quick(
        cls,
        *,
        trailing_share: float = 0.5,
        seed: int = 0,
        routed_rate: bool = False,
        group_calibration: bool = False,
    ) -> PredictorBench:
        return cls(
            workloads=("mooncake",),
            loads=(0.5, 1.0),
            duration_s=60.0,
            trailing_share=trailing_share,
            seed=seed,
            predictor=_predictor_config(routed_rate, group_calibration),
        )

    @classmethod
    def chosen(
        cls,
        *,
        quick: bool,
        trailing_share: float,
        seed: int,
        routed_rate: bool = False,
        group_calibration: bool = False,
    ) -> PredictorBench:
        """The quick bench or the full one, as a command's ``--quick`` flag says;
        ``routed_rate``: the predictors read the router's recent admission rate too;
        ``group_calibration``: both p95s get a factor per decision-time group."""
        if quick:
            return cls.quick(
                trailing_share=trailing_share,
                seed=seed,
                routed_rate=routed_rate,
                group_calibration=group_calibration,
            )
        return cls(
            trailing_share=trailing_share,
            seed=seed,
            predictor=_predictor_config(routed_rate, group_calibration),
        )


def _predictor_config(routed_rate: bool, group_calibration: bool = False) -> QuantileConfig:
    """The default settings, or those that read every feature (the router's rate too) and/or
    calibrate both p95s per decision-time group (models.group_calibration)."""
    config = QuantileConfig()
    if routed_rate:
        config = dataclasses.replace(config, ignored_features=())
    if group_calibration:
        config = dataclasses.replace(config, group_calibration=TARGETS)
    return config


@dataclass(frozen=True, slots=True)
class SimulatedRuns:
    """Every run's rows, pooled: the training part, the held-out part and the trailing
    traffic after the window (``run`` numbers the runs in all three)."""

    train: pd.DataFrame
    heldout: pd.DataFrame
    trailing: pd.DataFrame


def window_cut(frame: pd.DataFrame, trailing_share: float) -> pd.Timestamp:
    """The arrival time that ends a run's window: the first ``1 / (1 + trailing_share)`` of
    the span of its arrivals (the last arrival when the share is 0)."""
    if not trailing_share >= 0:
        raise InputError(
            f"trailing share {trailing_share}", field="trailing_share", expected="a number ≥ 0"
        )
    first, last = frame["arrival_time"].min(), frame["arrival_time"].max()
    cut: pd.Timestamp = first + (last - first) / (1.0 + trailing_share)
    return cut


def simulated_runs(bench: PredictorBench) -> SimulatedRuns:
    """Every (fleet, workload, load) run simulated for ``duration_s × (1 + trailing_share)`` of
    trace; its window's rows cut at 70% of their arrivals into training and held-out parts."""
    from placement.domain.fleet import load_fleet
    from sim.workloads.registry import load_workload
    from training.dataset import build_training_frame
    from training.split import split_by_time
    from training.telemetry.simulated import simulate_for_telemetry, telemetry_frames

    parts: dict[str, list[pd.DataFrame]] = {"train": [], "heldout": [], "trailing": []}
    span = bench.duration_s * (1.0 + bench.trailing_share)
    for fleet_name in bench.fleets:
        fleet = load_fleet(repo_root() / "data" / "fleets" / f"{fleet_name}.yaml")
        for workload_name in bench.workloads:
            workload = load_workload(workload_name, seed=bench.seed, duration_s=span)
            for load in bench.loads:
                result = simulate_for_telemetry(workload, fleet, load=load, seed=bench.seed)
                frame = build_training_frame(*telemetry_frames(result))
                in_window = frame["arrival_time"] <= window_cut(frame, bench.trailing_share)
                split = split_by_time(frame[in_window], TRAIN_FRACTION, min_rows=5)
                tags = {"run": len(parts["train"]), "offered_load": load}
                for name, rows in (
                    ("train", split.train),
                    ("heldout", split.heldout),
                    ("trailing", frame[~in_window]),
                ):
                    parts[name].append(rows.assign(**tags).assign(workload=workload_name))
    return SimulatedRuns(
        *(pd.concat(parts[name], ignore_index=True) for name in ("train", "heldout", "trailing"))
    )


def simulated_frames(bench: PredictorBench) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(train, held-out) of :func:`simulated_runs` (the trailing traffic left out)."""
    runs = simulated_runs(bench)
    return runs.train, runs.heldout


def _rows(split: str, predictor: LatencyPredictor, frame: pd.DataFrame) -> list[dict[str, Any]]:
    predicted = predictor.predict(frame)
    rows: list[dict[str, Any]] = []
    for target in ("ttft", "tpot"):
        observed = frame[f"{target}_s"].to_numpy(dtype=np.float64, na_value=np.nan)
        ok = np.isfinite(observed) & (observed > 0)
        y = observed[ok]
        p50 = predicted[f"{target}_p50"].to_numpy()[ok]
        p95 = predicted[f"{target}_p95"].to_numpy()[ok]
        n = int(ok.sum())
        ape = np.abs(p50 - y) / y
        rows.append(
            _row(
                target,
                0.5,
                split,
                mape=float(np.mean(ape)),
                median_ape=float(np.median(ape)),
                n=n,
            )
        )
        rows.append(_row(target, 0.95, split, coverage=float(np.mean(y <= p95)), n=n))
    busy = int((frame["generation_tokens_per_s"] > 0).sum())
    rows.append(_row("throughput", 0.5, split, mape=throughput_mape(predictor, frame), n=busy))
    return rows


def _scores(y: np.ndarray, p50: np.ndarray, p95: np.ndarray) -> dict[str, Any]:
    if len(y) == 0:
        return {"mape": None, "median_ape": None, "coverage": None, "n": 0}
    ape = np.abs(p50 - y) / y
    return {
        "mape": float(np.mean(ape)),
        "median_ape": float(np.median(ape)),
        "coverage": float(np.mean(y <= p95)),
        "n": len(y),
    }


def _ranges(values: np.ndarray, buckets: dict[str, tuple[float, float]]) -> dict[str, np.ndarray]:
    """Rows per bucket of half-open ranges [lo, hi)."""
    return {name: (values >= lo) & (values < hi) for name, (lo, hi) in buckets.items()}


def _labels(values: pd.Series[Any]) -> dict[str, np.ndarray]:
    """Rows per distinct value (named as printed, numbers without trailing zeros)."""
    column = values.to_numpy()
    return {
        f"{v:g}" if isinstance(v, float) else str(v): column == v
        for v in sorted(set(column.tolist()))
    }


def bucket_rows(predictor: LatencyPredictor, frame: pd.DataFrame) -> list[dict[str, Any]]:
    """p50 error and p95 coverage of each target by prompt length, by the router's requests in
    flight at routing, by output length, by accelerator, and by the run's offered load and
    workload (when the frame says them)."""
    predicted = predictor.predict(frame)
    groups: dict[str, dict[str, np.ndarray]] = {}
    groups["prompt_tokens"] = _ranges(frame["input_tokens"].to_numpy(np.float64), PROMPT_BUCKETS)
    in_flight = frame["backlog_requests"].to_numpy(dtype=np.float64)
    groups["in_flight"] = {
        name: (in_flight >= lo) & (in_flight <= hi) for name, (lo, hi) in IN_FLIGHT_BUCKETS.items()
    }
    groups["output_tokens"] = _ranges(frame["output_tokens"].to_numpy(np.float64), OUTPUT_BUCKETS)
    groups["accelerator"] = _labels(frame["accelerator"].astype(str))
    for by in ("offered_load", "workload"):
        if by in frame.columns:
            groups[by] = _labels(frame[by])
    rows: list[dict[str, Any]] = []
    for target in ("ttft", "tpot"):
        observed = frame[f"{target}_s"].to_numpy(dtype=np.float64, na_value=np.nan)
        ok = np.isfinite(observed) & (observed > 0)
        p50 = predicted[f"{target}_p50"].to_numpy()
        p95 = predicted[f"{target}_p95"].to_numpy()
        for by, buckets in groups.items():
            for bucket, mask in buckets.items():
                rows_ = ok & mask
                rows.append(
                    {
                        "target": target,
                        "by": by,
                        "bucket": bucket,
                        **_scores(observed[rows_], p50[rows_], p95[rows_]),
                    }
                )
    return rows


def bucket_misses(buckets: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The buckets with at least :data:`MIN_BUCKET_ROWS` rows that miss a target: p50 median
    APE above :data:`BUCKET_MEDIAN_APE` or p95 coverage outside :data:`COVERAGE_BAND`
    (``misses`` names which)."""
    lo, hi = COVERAGE_BAND
    out: list[dict[str, Any]] = []
    for b in buckets:
        if b["n"] < MIN_BUCKET_ROWS:
            continue
        missed = []
        if b["median_ape"] > BUCKET_MEDIAN_APE:
            missed.append("median_ape")
        if not lo <= b["coverage"] <= hi:
            missed.append("coverage")
        if missed:
            out.append({**b, "misses": ",".join(missed)})
    return out


def _latency_rows(
    split: str, predictor: LatencyPredictor, frame: pd.DataFrame
) -> list[dict[str, Any]]:
    return [r for r in _rows(split, predictor, frame) if r["target"] != "throughput"]


def _row(
    target: str,
    quantile: float,
    split: str,
    *,
    mape: float | None = None,
    median_ape: float | None = None,
    coverage: float | None = None,
    n: int,
) -> dict[str, Any]:
    return {
        "target": target,
        "quantile": quantile,
        "split": split,
        "mape": mape,
        "median_ape": median_ape,
        "coverage": coverage,
        "n": n,
    }


def run_predictor_bench(
    bench: PredictorBench, out: Path | None = None, *, progress: Any = None
) -> dict[str, Any]:
    """Train, score every split, print the table and write ``{"rows": [...]}`` to ``out``."""
    say = progress or (lambda _message: None)
    say("simulating telemetry")
    train, heldout = simulated_frames(bench)
    measured = splitwise_frame()
    held_prompts = measured["input_tokens"].isin(SPLITWISE_HELDOUT_PROMPTS)
    say(f"training on {len(train)} telemetry rows and {int((~held_prompts).sum())} measured")
    predictor = LatencyPredictor(bench.predictor).fit(train, measurements=measured[~held_prompts])
    rows = _rows("heldout", predictor, heldout)
    buckets = bucket_rows(predictor, heldout)
    rows += _latency_rows("splitwise", predictor, measured[held_prompts])
    for accelerator in sorted(measured["accelerator"].unique()):
        say(f"training with Splitwise rows of the other GPU than {accelerator}")
        on = measured["accelerator"] == accelerator
        other = LatencyPredictor(bench.predictor).fit(train, measurements=measured[~on])
        rows += _latency_rows(f"splitwise:cross_hardware:{accelerator}", other, measured[on])
    say("training on telemetry alone")
    rows += _latency_rows(
        "splitwise:sim_only", LatencyPredictor(bench.predictor).fit(train), measured
    )
    for accelerator in LEAVE_OUT:
        seen = train["accelerator"].astype(str) != accelerator
        unseen = pd.concat([train[~seen], heldout[heldout["accelerator"] == accelerator]])
        if unseen.empty or seen.all():
            continue
        say(f"training without {accelerator}")
        kept = measured[(measured["accelerator"] != accelerator) & ~held_prompts]
        partial = LatencyPredictor(bench.predictor).fit(train[seen], measurements=kept)
        rows += _rows(f"leave_out:{accelerator}", partial, unseen)
    print_table(
        f"Predictor accuracy ({len(train)} training rows; mape of p50, coverage of p95)",
        rows,
        COLUMNS,
    )
    print_table(
        f"Held-out split by bucket (targets read where n >= {MIN_BUCKET_ROWS})",
        buckets,
        BUCKET_COLUMNS,
    )
    misses = bucket_misses(buckets)
    print_table(
        f"Buckets with n >= {MIN_BUCKET_ROWS} missing median APE <= {BUCKET_MEDIAN_APE} or "
        f"coverage in [{COVERAGE_BAND[0]}, {COVERAGE_BAND[1]}]",
        misses,
        (*BUCKET_COLUMNS, "misses"),
    )
    payload: dict[str, Any] = {
        "trailing_share": bench.trailing_share,
        "seed": bench.seed,
        "ignored_features": list(bench.predictor.ignored_features),
        "group_calibration": list(bench.predictor.group_calibration),
        "rows": rows,
        "buckets": buckets,
        "bucket_misses": misses,
    }
    if out is not None:
        write_json(out, payload)
    return payload
