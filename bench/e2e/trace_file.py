"""The Mooncake slice as a trace file a load generator replays at its timestamps.

One JSON object per line in the Mooncake format that aiperf reads (``--custom-dataset-type
mooncake_trace``): ``timestamp`` (milliseconds from the window's start, already scaled to the
load), ``text_input`` (the prompt: :class:`bench.trace_text.TraceText` turns the request's block
ids into the same words wherever a block appears, so every router and the emulator's prefix
cache see exactly the trace's prefix sharing) and ``output_length`` (the trace's output tokens,
sent as ``max_tokens``; the emulator always generates that many).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from bench.trace_text import TraceText
from placement.domain.fleet import Fleet
from placement.errors import InputError
from sim.capacity import rate_for_load
from sim.costmodel.factory import cost_model_for_replica
from sim.workloads.base import Workload


@dataclass(frozen=True, slots=True, kw_only=True)
class TraceSlice:
    """What was written: how many requests over how long, at what rate."""

    path: Path
    load: float
    requests: int
    duration_s: float
    rate_rps: float
    mean_input_tokens: float


def slice_at_load(
    workload: Workload, fleet: Fleet, *, load: float, start_s: float, duration_s: float
) -> Workload:
    """``duration_s`` seconds of ``workload`` from ``start_s`` (in the scaled trace's time),
    scaled so the fleet is offered ``load`` × its nominal capacity."""
    if load <= 0 or duration_s <= 0 or start_s < 0:
        raise InputError("load and duration must be > 0, start ≥ 0", field="--loads/--duration")
    rate = rate_for_load(load, fleet, workload, cost_model_for_replica)
    window = workload.scaled(rate).window(start_s, start_s + duration_s)
    if not window.requests:
        raise InputError(
            f"no request of the trace arrives in [{start_s:g}, {start_s + duration_s:g}) s "
            f"at load {load:g}",
            field="--start",
        )
    return window


def write_trace(path: Path, window: Workload, text: TraceText, *, load: float) -> TraceSlice:
    """Write ``window`` as a Mooncake-format JSONL file with prompt text."""
    path.parent.mkdir(parents=True, exist_ok=True)
    total_input = 0
    with path.open("w", encoding="utf-8") as out:
        for r in window.requests:
            prompt = text.prompt(r.block_hashes, r.input_tokens, window.block_tokens)
            total_input += r.input_tokens
            line = {
                "timestamp": round(r.arrival_s * 1000.0, 3),
                "text_input": prompt,
                "output_length": max(1, r.output_tokens),
            }
            out.write(json.dumps(line) + "\n")
    n = len(window.requests)
    span = max(window.duration_s, 1e-9)
    return TraceSlice(
        path=path,
        load=load,
        requests=n,
        duration_s=window.duration_s,
        rate_rps=n / span,
        mean_input_tokens=total_input / n,
    )
