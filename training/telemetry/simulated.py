"""Telemetry of a simulated run, in the schemas of :mod:`training.telemetry.schema`.

Simulated times are seconds from 0; they become UTC timestamps from ``start`` so that the
store's day partitions are real. A request that never produced its last token and has no
error of its own gets the error ``"unfinished"`` (it was still in flight at the drain horizon);
times it never reached stay null. A replica that is down at a sample instant has no row: its
``/metrics`` endpoint could not have been scraped either.

The TTFT and TPOT histogram columns are derived from the requests' final outcomes: a TTFT is
observed on the serving replica at the request's first token, and its inter-token latencies
(sum ``finish − first token``, count ``output_tokens − 1``) at its finish.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta

import numpy as np
import numpy.typing as npt
import pandas as pd
import pyarrow as pa

from placement.domain.fleet import Fleet
from placement.domain.requests import Request
from placement.errors import InputError
from sim.simulator import ReplicaSample, SimConfig, SimResult, Simulator
from sim.workloads.base import Workload
from training.telemetry.schema import (
    REPLICA_SAMPLES,
    REQUEST_COLUMNS,
    REQUESTS,
    SAMPLE_COLUMNS,
    SORT_KEYS,
    TIMESTAMP,
    arrow_schema,
    to_frame,
)

DEFAULT_START = datetime(2026, 1, 1, tzinfo=UTC)
UNFINISHED = "unfinished"

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)

FloatArray = npt.NDArray[np.float64]


def telemetry_frames(
    result: SimResult, *, start: datetime = DEFAULT_START, less_slot_wait: bool = False
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A run's (requests, replica_samples) frames; ``start`` (timezone-aware) is simulated
    time 0. The samples frame is empty unless the run had ``SimConfig(sample_interval_s=…)``.
    ``less_slot_wait``: each request's ``ttft_s`` leaves out the time its admission waited for
    a LoRA slot for its adapter (:attr:`Request.slot_wait_s`): the replica's TTFT, not its
    adapter's queue (which the route path and the gate add on their own)."""
    start_us = _epoch_us(start)
    requests = requests_frame(
        result.requests, result.fleet, start_us, less_slot_wait=less_slot_wait
    )
    samples = samples_frame(result.samples, result.requests, result.fleet, start_us)
    return requests, samples


def simulate_for_telemetry(
    workload: Workload,
    fleet: Fleet,
    *,
    load: float,
    policy: str = "least_outstanding",
    sample_interval_s: float = 1.0,
    seed: int = 0,
    progress: Callable[[int], None] | None = None,
) -> SimResult:
    """Run ``workload`` at ``load`` × the fleet's nominal capacity (as the routing benchmark
    defines it) through the named policy, sampling every replica every ``sample_interval_s``.
    ``progress(n)`` gets the number of arrivals handled, every 10,000."""
    # imported here: the cost models load scipy, which readers of telemetry_frames never need
    from sim.capacity import fleet_capacity, rate_multiplier
    from sim.costmodel.factory import cost_model_for_replica
    from sim.peers import PolicyContext, make_policy

    if not load > 0:
        raise InputError(f"load {load}", field="load", expected="> 0 (× nominal capacity)")
    if not sample_interval_s > 0:
        raise InputError(
            f"sample interval {sample_interval_s} s", field="interval", expected="> 0 seconds"
        )
    cost_model = cost_model_for_replica
    capacity = fleet_capacity(fleet, workload, cost_model)
    scaled = workload.scaled(rate_multiplier(load, workload, sum(capacity)))
    top = max(capacity)
    simulator = Simulator(
        fleet,
        make_policy(policy, PolicyContext(seed=seed, block_tokens=workload.block_tokens)),
        scaled,
        cost_model=cost_model,
        config=SimConfig(sample_interval_s=sample_interval_s),
        weights=[c / top for c in capacity],
    )
    return simulator.run(progress)


def _epoch_us(start: datetime) -> int:
    if start.tzinfo is None or start.utcoffset() is None:
        raise InputError(
            f"start time {start.isoformat()} has no time zone",
            field="start",
            expected="a timezone-aware datetime, e.g. 2026-01-01T00:00:00+00:00",
        )
    return (start - _EPOCH) // _MICROSECOND


def _timestamps(start_us: int, seconds: FloatArray) -> pa.Array:
    """Simulated seconds as UTC timestamps; a negative second (never reached) is null."""
    us = start_us + np.round(np.where(seconds < 0, 0.0, seconds) * 1e6).astype(np.int64)
    return pa.array(us, type=TIMESTAMP, mask=seconds < 0)


def _floats(values: FloatArray, valid: npt.NDArray[np.bool_]) -> pa.Array:
    return pa.array(np.where(valid, values, 0.0), type=pa.float64(), mask=~valid)


def requests_frame(
    requests: Sequence[Request], fleet: Fleet, start_us: int, *, less_slot_wait: bool = False
) -> pd.DataFrame:
    """One row per request, with its outcome and the serving replica's hardware; with
    ``less_slot_wait`` its TTFT leaves out its wait for a LoRA slot (:func:`telemetry_frames`)."""
    n = len(requests)
    arrival = np.fromiter((r.arrival_s for r in requests), np.float64, n)
    first = np.fromiter((r.first_token_s for r in requests), np.float64, n)
    finish = np.fromiter((r.finish_s for r in requests), np.float64, n)
    output = np.fromiter((r.output_tokens for r in requests), np.int64, n)
    specs = [fleet.replicas[r.replica] if r.replica >= 0 else None for r in requests]
    has_first = first >= 0
    has_finish = finish >= 0
    ttft = first - arrival
    if less_slot_wait:
        ttft = ttft - np.fromiter((r.slot_wait_s for r in requests), np.float64, n)
    e2e = finish - arrival
    has_tpot = has_first & has_finish & (output > 1)
    tpot = (finish - first) / np.maximum(output - 1, 1)
    columns: dict[str, pa.Array] = {
        "request_id": pa.array([r.id for r in requests], pa.int64()),
        "arrival_time": _timestamps(start_us, arrival),
        "first_token_time": _timestamps(start_us, first),
        "finish_time": _timestamps(start_us, finish),
        "input_tokens": pa.array([r.input_tokens for r in requests], pa.int64()),
        "cached_tokens": pa.array([r.cached_tokens for r in requests], pa.int64()),
        "output_tokens": pa.array(output, pa.int64()),
        "replica": pa.array([s.id if s else None for s in specs], pa.string()),
        "accelerator": pa.array([s.accelerator.kind if s else None for s in specs], pa.string()),
        "model": pa.array([s.model.name if s else None for s in specs], pa.string()),
        "tp": pa.array([s.tp if s else None for s in specs], pa.int32()),
        "tenant": pa.array([r.tenant for r in requests], pa.string()),
        "request_class": pa.array([r.request_class for r in requests], pa.string()),
        "backlog_requests": pa.array([r.backlog_requests for r in requests], pa.int64()),
        "backlog_prefill_tokens": pa.array(
            [r.backlog_prefill_tokens for r in requests], pa.int64()
        ),
        "error": pa.array(
            [r.error or (UNFINISHED if r.finish_s < 0 else "") for r in requests], pa.string()
        ),
        "ttft_s": _floats(ttft, has_first),
        "tpot_s": _floats(tpot, has_tpot),
        "e2e_s": _floats(e2e, has_finish),
    }
    table = pa.table(columns, schema=arrow_schema(REQUEST_COLUMNS))
    frame = to_frame(table, REQUEST_COLUMNS)
    return frame.sort_values(SORT_KEYS[REQUESTS], kind="stable", ignore_index=True)


class _Histogram:
    """Cumulative (sum, count) of observations on one replica, looked up by time."""

    def __init__(self, times: FloatArray, values: FloatArray, counts: FloatArray) -> None:
        order = np.argsort(times, kind="stable")
        self.times = times[order]
        self.sums = np.concatenate(([0.0], np.cumsum(values[order])))
        self.counts = np.concatenate(([0.0], np.cumsum(counts[order])))

    def at(self, t: FloatArray) -> tuple[FloatArray, FloatArray]:
        """(sum, count) of the observations made at or before each time in ``t``."""
        i = np.searchsorted(self.times, t, side="right")
        return self.sums[i], self.counts[i]


def _latency_histograms(
    requests: Sequence[Request], replicas: int
) -> tuple[list[_Histogram], list[_Histogram]]:
    """Per replica, the TTFT histogram (observed at first token) and the inter-token latency
    histogram (observed at finish) of the requests it served."""
    by_replica: list[list[Request]] = [[] for _ in range(replicas)]
    for r in requests:
        if r.replica >= 0 and r.first_token_s >= 0:
            by_replica[r.replica].append(r)
    ttft: list[_Histogram] = []
    tpot: list[_Histogram] = []
    for served in by_replica:
        first = np.array([r.first_token_s for r in served], np.float64)
        arrival = np.array([r.arrival_s for r in served], np.float64)
        ttft.append(_Histogram(first, first - arrival, np.ones_like(first)))
        done = [r for r in served if r.finish_s >= 0 and r.output_tokens > 1]
        finish = np.array([r.finish_s for r in done], np.float64)
        first_done = np.array([r.first_token_s for r in done], np.float64)
        intervals = np.array([r.output_tokens - 1 for r in done], np.float64)
        tpot.append(_Histogram(finish, finish - first_done, intervals))
    return ttft, tpot


def samples_frame(
    samples: Sequence[ReplicaSample], requests: Sequence[Request], fleet: Fleet, start_us: int
) -> pd.DataFrame:
    """One row per live replica per sample instant."""
    live = [s for s in samples if s.alive]
    n = len(live)
    specs = [fleet.replicas[s.replica] for s in live]
    times = np.fromiter((s.time_s for s in live), np.float64, n)
    index = np.fromiter((s.replica for s in live), np.int64, n)
    ttft_sum, ttft_count, tpot_sum, tpot_count = (np.zeros(n) for _ in range(4))
    ttft_hist, tpot_hist = _latency_histograms(requests, len(fleet.replicas))
    for i in np.unique(index):
        rows = index == i
        ttft_sum[rows], ttft_count[rows] = ttft_hist[i].at(times[rows])
        tpot_sum[rows], tpot_count[rows] = tpot_hist[i].at(times[rows])
    columns: dict[str, pa.Array] = {
        "time": _timestamps(start_us, times),
        "replica": pa.array([s.id for s in specs], pa.string()),
        "accelerator": pa.array([s.accelerator.kind for s in specs], pa.string()),
        "model": pa.array([s.model.name for s in specs], pa.string()),
        "tp": pa.array([s.tp for s in specs], pa.int32()),
        "num_requests_running": pa.array([s.num_running for s in live], pa.int64()),
        "num_requests_waiting": pa.array([s.num_waiting for s in live], pa.int64()),
        "kv_cache_usage_perc": pa.array([s.kv_usage for s in live], pa.float64()),
        "prompt_tokens_total": pa.array([s.prompt_tokens for s in live], pa.int64()),
        "generation_tokens_total": pa.array([s.generation_tokens for s in live], pa.int64()),
        "prefix_cache_hit_tokens_total": pa.array(
            [s.prefix_cache_hit_tokens for s in live], pa.int64()
        ),
        "ttft_seconds_sum": pa.array(ttft_sum, pa.float64()),
        "ttft_seconds_count": pa.array(ttft_count, pa.float64()),
        "tpot_seconds_sum": pa.array(tpot_sum, pa.float64()),
        "tpot_seconds_count": pa.array(tpot_count, pa.float64()),
    }
    table = pa.table(columns, schema=arrow_schema(SAMPLE_COLUMNS))
    frame = to_frame(table, SAMPLE_COLUMNS)
    return frame.sort_values(SORT_KEYS[REPLICA_SAMPLES], kind="stable", ignore_index=True)
