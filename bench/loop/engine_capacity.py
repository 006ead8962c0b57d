"""Capacity from the simulator's own engine: the "perfect knowledge" side of the fluid bound.

The bound must not inherit the predictors' errors (a conservative capacity table would put the
bound below what a router achieves), nor charge a request costs that continuous batching shares
out. So for the bound a request's engine time is a lower bound read from the very cost model
the simulator runs:

* every token it puts through the model (uncached prompt + output) at the per-token cost of
  the fullest iteration (``max_num_batched_tokens`` tokens: the per-iteration overhead and the
  GEMMs' weight reads are shared by that many tokens);
* plus its own context attention: prefill chunks over the growing prompt, and each output
  token's decode attention at the largest decode batch.

The reciprocal is the replica's fluid throughput for that mix. A mix whose prefill alone (idle
replica) exceeds the class's TTFT SLO, or whose decode alone exceeds its TPOT SLO, has none.
Queueing is free in the fluid model, so this is an upper bound, not a capacity at SLO.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from models.capacity import Slo
from placement.domain.fleet import Fleet, ReplicaSpec
from sim.capacity import prefill_s
from sim.costmodel.factory import cost_model_for_replica

ENGINE_SOURCE = "simulator engine (fluid)"


@dataclass
class _EngineKind:
    spec: ReplicaSpec
    slos: list[Slo] = field(default_factory=list)
    _cache: dict[tuple[int, int, int], float] = field(default_factory=dict)

    def slo_index(self, slo: Slo) -> int:
        if slo not in self.slos:
            self.slos.append(slo)
        return self.slos.index(slo)

    def lookup(self, mean_input_tokens: float, output_tokens: float, slo_index: int) -> float:
        key = (round(mean_input_tokens), round(output_tokens), slo_index)
        if key not in self._cache:
            self._cache[key] = self._rate(key[0], key[1], self.slos[slo_index])
        return self._cache[key]

    def _rate(self, uncached: int, output: int, slo: Slo) -> float:
        spec = self.spec
        cost = cost_model_for_replica(spec)
        uncached = max(uncached, 1)
        alone = cost.iteration_s([], 1, uncached + output) if output > 1 else 0.0
        if prefill_s(spec, cost, uncached) > slo.ttft_p95_s or alone > slo.tpot_p95_s:
            return 0.0
        full = spec.max_num_batched_tokens
        per_token = (cost.overhead_s + cost.linear_s(full)) / full
        attention = 0.0
        done = 0
        while done < uncached:
            chunk = min(full, uncached - done)
            attention += cost.prefill_attention_s(chunk, done)
            done += chunk
        batch = max(1, spec.max_num_seqs)
        d0, d1 = cost.decode_attention_coeffs(batch)
        attention += max(output - 1, 0) * (d0 / batch + d1 * (uncached + output / 2))
        return 1.0 / max((uncached + output) * per_token + attention, 1e-12)


class EngineCapacity:
    """A :class:`~placement.solver.capacity.CapacitySource` over the fleet's replica kinds."""

    source = ENGINE_SOURCE

    def __init__(self, fleet: Fleet) -> None:
        self._kinds: dict[tuple[str, str, int], _EngineKind] = {}
        for spec in fleet.replicas:
            key = (spec.accelerator.kind, spec.model.name, spec.tp)
            self._kinds.setdefault(key, _EngineKind(spec))

    def table(self, accelerator: str, model: str, tp: int) -> _EngineKind:
        return self._kinds[(accelerator, model, tp)]
