"""Summary figures of a workload: size, span, lengths and how much of the prompt traffic repeats."""

from __future__ import annotations

from dataclasses import dataclass

from sim.workloads.base import Workload


@dataclass(frozen=True, slots=True)
class WorkloadStats:
    """What a workload looks like at a glance (tokens are per request)."""

    requests: int
    duration_s: float
    rate_rps: float
    mean_input_tokens: float
    mean_output_tokens: float
    prefix_reuse: float  # share of all input tokens lying in blocks seen earlier in the trace


def workload_stats(workload: Workload) -> WorkloadStats:
    """Figures of ``workload``; ``prefix_reuse`` is an upper bound on what an infinite cache hits.

    A request's reused tokens are its leading blocks whose hashes appeared in any earlier request
    (hashes are chained, so a seen hash implies its whole prefix was seen), capped at its input
    length (a trace's last block may be partial).
    """
    seen: set[int] = set()
    reused = 0
    total_in = 0
    total_out = 0
    for r in workload.requests:
        total_in += r.input_tokens
        total_out += r.output_tokens
        k = 0
        for h in r.block_hashes:
            if h not in seen:
                break
            k += 1
        reused += min(k * r.block_tokens, r.input_tokens)
        seen.update(r.block_hashes[k:])
    n = len(workload)
    span = workload.duration_s
    return WorkloadStats(
        requests=n,
        duration_s=span,
        rate_rps=n / span if span > 0 else 0.0,
        mean_input_tokens=total_in / n if n else 0.0,
        mean_output_tokens=total_out / n if n else 0.0,
        prefix_reuse=reused / total_in if total_in else 0.0,
    )
