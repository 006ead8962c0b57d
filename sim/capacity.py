"""Nominal capacity of a fleet for a workload: what "load 1.0" means in the benchmarks.

A replica's nominal service time for an average request is its prefill time per token at a
full chunk times the mean prompt length, plus its decode time per token at a reference batch
(as many average sequences as its KV cache holds, at most ``max_num_seqs``) times the mean
output length. No prefix-cache hits are assumed, so a cache-aware router can go past load 1.0.
"""

from __future__ import annotations

from collections.abc import Callable

from placement.domain.fleet import Fleet, ReplicaSpec
from sim.costmodel.base import IterationCostModel
from sim.workloads.base import Workload


def replica_capacity_rps(
    spec: ReplicaSpec, cost: IterationCostModel, mean_input: float, mean_output: float
) -> float:
    chunk = spec.max_num_batched_tokens
    prefill_per_token = cost.iteration_s([(chunk, 0)], 0, 0) / chunk
    per_seq_tokens = max(1.0, mean_input + mean_output / 2)
    batch = int(max(1, min(spec.max_num_seqs, spec.kv_capacity_tokens // per_seq_tokens)))
    context = int(batch * per_seq_tokens)
    decode_per_token = cost.iteration_s([], batch, context) / batch
    seconds = mean_input * prefill_per_token + mean_output * decode_per_token
    return 1.0 / seconds


def fleet_capacity(
    fleet: Fleet, workload: Workload, cost_model: Callable[[ReplicaSpec], IterationCostModel]
) -> list[float]:
    """Nominal requests/s of each replica for this workload's mean request."""
    n = max(1, len(workload.requests))
    mean_in = sum(r.input_tokens for r in workload.requests) / n
    mean_out = sum(r.output_tokens for r in workload.requests) / n
    return [replica_capacity_rps(s, cost_model(s), mean_in, mean_out) for s in fleet.replicas]


def rate_for_load(
    load: float,
    fleet: Fleet,
    workload: Workload,
    cost_model: Callable[[ReplicaSpec], IterationCostModel],
) -> float:
    """The arrival-rate multiplier that makes the workload offer ``load`` × nominal capacity."""
    native = len(workload.requests) / max(workload.duration_s, 1e-9)
    return load * sum(fleet_capacity(fleet, workload, cost_model)) / native
