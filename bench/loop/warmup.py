"""A warm fleet under each reported run: the head's last seconds replayed before the tail.

The loop compresses the tail to a load, so at overload minutes of trace arrive in seconds of
simulated time on a fleet that starts empty, while long decodes outlast the run. With a
warm-up of ``seconds`` simulated seconds, a reported run first replays the head's requests of
its last ``seconds`` at the run's rate multiplier, in the trace's own order (they end where
the tail starts), then the tail, shifted by ``seconds``. The same policy serves both; every
figure of the run counts the tail's own requests only. A warm-up of 0 is the run as before.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

from placement.domain.requests import Request
from placement.errors import InputError
from sim.simulator import SimResult
from sim.workloads.base import Workload


def check_warm_up(seconds: float, field: str = "--warm-up-s") -> float:
    """``seconds`` if it is a warm-up (finite, ≥ 0); else a clear error naming ``field``."""
    if not (math.isfinite(seconds) and seconds >= 0):
        raise InputError(f"{seconds}", field=field, expected="simulated seconds >= 0")
    return seconds


def warm_up_requests(
    head: Workload, head_span_s: float, seconds: float, rate: float
) -> list[Request]:
    """The requests of ``head`` (a trace's first ``head_span_s`` trace-seconds, timed from 0)
    arriving in its last ``seconds`` at ``rate`` × its pace, unserved, timed so that the
    head's end falls at ``seconds`` (where the shifted tail starts)."""
    since = head_span_s - seconds * rate
    return [
        r.unserved(arrival_s=(r.arrival_s - head_span_s) / rate + seconds)
        for r in head.requests
        if r.arrival_s >= since
    ]


def warm_run(
    simulate: Callable[[Workload], SimResult],
    tail: Workload,
    warm: list[Request],
    seconds: float,
) -> tuple[SimResult, Workload]:
    """Run ``tail`` (at its load) after ``warm`` (:func:`warm_up_requests` at the same load):
    the result over the tail's requests only, and the tail as it ran (shifted by
    ``seconds``). No warm-up: ``simulate(tail)`` and ``tail`` untouched."""
    if seconds == 0:
        return simulate(tail), tail
    counted = [r.unserved(arrival_s=r.arrival_s + seconds) for r in tail.requests]
    joined = dataclasses.replace(tail, requests=warm + counted)
    result = simulate(joined)
    own = result.requests[len(warm) :]
    refused = sum(1 for r in own if r.error.startswith("refused"))
    return (
        dataclasses.replace(result, requests=own, refused=refused),
        dataclasses.replace(tail, requests=own),
    )
