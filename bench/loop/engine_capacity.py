"""Capacity from the simulator's own engine: the "perfect knowledge" side of the fluid bound.

The bound must not inherit the predictors' errors (a conservative capacity table would make the
bound fall below what a router achieves). So for the bound a replica's capacity for a request
mix is read from the very cost model the simulator runs: one request costs the time to prefill
its uncached prompt alone (chunked, :func:`sim.capacity.prefill_s`) plus its output tokens at
the per-token decode cost of the fullest batch the KV cache holds (decode is shared across the
batch, :func:`sim.capacity.decode_s_per_token`). Its reciprocal is the replica's fluid
throughput for that mix; a mix whose prefill alone exceeds the class's TTFT SLO, or whose
per-token time at the smallest batch exceeds the TPOT SLO, has none. Queueing is free in the
fluid model, so this is an upper bound, not a capacity at SLO.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from models.capacity import Slo
from placement.domain.fleet import Fleet, ReplicaSpec
from sim.capacity import decode_s_per_token, prefill_s
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
        cost = cost_model_for_replica(self.spec)
        prefill = prefill_s(self.spec, cost, max(uncached, 1))
        alone = cost.iteration_s([], 1, uncached + output) if output > 1 else 0.0
        if prefill > slo.ttft_p95_s or alone > slo.tpot_p95_s:
            return 0.0
        decode = max(output - 1, 0) * decode_s_per_token(self.spec, cost, uncached + output / 2)
        return 1.0 / max(prefill + decode, 1e-9)


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
