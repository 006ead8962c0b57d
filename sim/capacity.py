"""Nominal capacity of a fleet for a workload: what "load 1.0" means in the benchmarks.

A replica's nominal service time for a request is the time to prefill its prompt alone, chunk
by chunk (attention over the growing context included, no prefix-cache hits), plus its output
tokens at the per-token decode time of a reference batch (as many average sequences as the KV
cache holds, at most ``max_num_seqs``). It is averaged over a deterministic sample of the
workload's requests, since prefill cost grows faster than linearly with prompt length. With no
cache hits assumed, a cache-aware router can stay within SLO past load 1.0.
"""

from __future__ import annotations

from collections.abc import Callable

from placement.domain.fleet import Fleet, ReplicaSpec
from sim.costmodel.base import IterationCostModel
from sim.workloads.base import Workload

SAMPLE = 2000


def prefill_s(spec: ReplicaSpec, cost: IterationCostModel, input_tokens: int) -> float:
    """Time to prefill one prompt alone in chunks of ``max_num_batched_tokens``."""
    chunk = spec.max_num_batched_tokens
    t = 0.0
    done = 0
    while done < input_tokens:
        c = min(chunk, input_tokens - done)
        t += cost.overhead_s + cost.linear_s(c) + cost.prefill_attention_s(c, done)
        done += c
    return t


def decode_s_per_token(spec: ReplicaSpec, cost: IterationCostModel, tokens_per_seq: float) -> float:
    """Per-token decode time at the batch a replica's KV cache sustains."""
    per_seq = max(1.0, tokens_per_seq)
    batch = int(max(1, min(spec.max_num_seqs, spec.kv_capacity_tokens // per_seq)))
    return cost.iteration_s([], batch, int(batch * per_seq)) / batch


def fleet_capacity(
    fleet: Fleet, workload: Workload, cost_model: Callable[[ReplicaSpec], IterationCostModel]
) -> list[float]:
    """Nominal requests/s of each replica for this workload's request mix."""
    reqs = workload.requests
    step = max(1, len(reqs) // SAMPLE)
    sample = reqs[::step] or reqs
    n = max(1, len(sample))
    mean_in = sum(r.input_tokens for r in sample) / n
    mean_out = sum(r.output_tokens for r in sample) / n
    out: list[float] = []
    cache: dict[tuple[str, str, int, int], float] = {}
    for spec in fleet.replicas:
        key = (spec.accelerator.kind, spec.model.name, spec.tp, spec.max_num_batched_tokens)
        if key not in cache:
            cost = cost_model(spec)
            pf = sum(prefill_s(spec, cost, r.input_tokens) for r in sample) / n
            dec = mean_out * decode_s_per_token(spec, cost, mean_in + mean_out / 2)
            cache[key] = 1.0 / (pf + dec) if pf + dec > 0 else 0.0
        out.append(cache[key])
    return out


def rate_multiplier(load: float, workload: Workload, capacity_rps: float) -> float:
    """The arrival-rate multiplier that makes ``workload`` offer ``load`` × ``capacity_rps``."""
    native = len(workload.requests) / max(workload.duration_s, 1e-9)
    return load * capacity_rps / native


def rate_for_load(
    load: float,
    fleet: Fleet,
    workload: Workload,
    cost_model: Callable[[ReplicaSpec], IterationCostModel],
) -> float:
    """The arrival-rate multiplier that makes the workload offer ``load`` × nominal capacity."""
    return rate_multiplier(load, workload, sum(fleet_capacity(fleet, workload, cost_model)))
