"""The latency a router's hop adds over going straight to a replica, at a fixed request rate.

The same open-loop stream of short completions (a short prompt, a few output tokens, answers
read whole) goes once straight to the replicas, round robin, and then through each router in
turn (:func:`bench.gateway_latency.open_loop_phase`: the client measures each request from
sending to its last byte). A router's added latency is its percentile minus the direct one;
its CPU per request is the CPU of the hop's processes (from ``/proc``) over the phase per
request, and again less what they use idle (replica scrapes, health checks): the quieter of a
sample before the phase and one after it, since one of them may catch the planner's solve.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import numpy as np

from bench.e2e.routers import RouterStack
from bench.gateway_latency import open_loop_phase

IDLE_S = 3.0
WARM_S = 1.0


def direct_phase(
    replicas: list[str], model: str, *, rate: float, duration_s: float, max_tokens: int
) -> dict[str, Any]:
    body = {"model": model, "max_tokens": max_tokens, "stream": False}
    asyncio.run(open_loop_phase(replicas, body, {}, rate, WARM_S))
    return asyncio.run(open_loop_phase(replicas, body, {}, rate, duration_s))


def probe_row(
    stack: RouterStack,
    model: str,
    direct: dict[str, Any],
    *,
    rate: float,
    duration_s: float,
    max_tokens: int,
) -> dict[str, Any]:
    body = {"model": model, "max_tokens": max_tokens, "stream": False}
    headers = stack.headers()
    asyncio.run(open_loop_phase(stack.urls, body, headers, rate, WARM_S))
    before = idle_cores(stack)
    cpu0 = stack.cpu_s()
    through = asyncio.run(open_loop_phase(stack.urls, body, headers, rate, duration_s))
    cpu_s = stack.cpu_s() - cpu0
    # the quieter of two idle samples: one may catch a planner's solve (the gateway's first
    # solve comes at start, then one every solve period), which is not the hop's idle cost
    return _row(stack.name, rate, through, direct, cpu_s, min(before, idle_cores(stack)))


def idle_cores(stack: RouterStack) -> float:
    """The cores the hop's processes use with no request for :data:`IDLE_S`."""
    cpu0, t0 = stack.cpu_s(), time.perf_counter()
    time.sleep(IDLE_S)
    return (stack.cpu_s() - cpu0) / (time.perf_counter() - t0)


def _pct_ms(latencies: list[float], q: float) -> float:
    return float(np.percentile(latencies, q)) * 1e3 if latencies else float("nan")


def _row(
    router: str,
    rate: float,
    through: dict[str, Any],
    direct: dict[str, Any],
    cpu_s: float,
    idle_cores: float,
) -> dict[str, Any]:
    sent = int(through["sent"])
    p50, p99 = _pct_ms(through["latencies"], 50), _pct_ms(through["latencies"], 99)
    base50, base99 = _pct_ms(direct["latencies"], 50), _pct_ms(direct["latencies"], 99)
    busy_s = max(0.0, cpu_s - idle_cores * float(through["wall_s"]))
    return {
        "router": router,
        "phase": "probe",
        "load": None,
        "rate_rps": rate,
        "achieved_rps": sent / float(through["wall_s"]),
        "requests": sent,
        "completed": sent - int(through["failed"]),
        "failed": int(through["failed"]),
        "statuses": through["statuses"],
        "goodput_rps": None,
        "attainment": None,
        "ttft_p50_s": None,
        "ttft_p99_s": None,
        "latency_p50_ms": p50,
        "latency_p99_ms": p99,
        "direct_latency_p50_ms": base50,
        "direct_latency_p99_ms": base99,
        "added_latency_p50_ms": p50 - base50,
        "added_latency_p99_ms": p99 - base99,
        "cpu_us_per_request": cpu_s / sent * 1e6 if sent else None,
        "cpu_us_per_request_busy": busy_s / sent * 1e6 if sent else None,
        "idle_cores": idle_cores,
    }
