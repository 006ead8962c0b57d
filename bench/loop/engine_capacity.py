"""Capacity from the simulator's own engine: the "perfect knowledge" side of the fluid bound.

The bound must not inherit the predictors' errors (a conservative capacity table would put the
bound below what a router achieves), nor charge a request costs that continuous batching shares
out. So for the bound a request's engine time is a lower bound read from the very cost model
the simulator runs:

* every token it puts through the model (uncached prompt + output) at the per-token cost of
  the fullest iteration (``max_num_batched_tokens`` tokens: the per-iteration overhead and the
  GEMMs' weight reads are shared by that many tokens);
* plus its own context attention: prefill chunks over the growing prompt, and each output
  token's decode attention at the largest decode batch. A prompt whose first tokens are cached
  (:meth:`_EngineKind.lookup_cached`) computes only the rest, but its chunks and its output
  tokens still attend over the whole context, cached part included.
* Decode runs at the largest batch of such sequences whose iteration still meets the class's
  TPOT SLO (at most ``max_num_seqs``): long contexts make every decode step slower, so the
  SLO caps how many share one (a larger batch would amortise more, but miss).

The reciprocal is the replica's fluid throughput for that mix. A mix whose prefill alone (idle
replica) exceeds the class's TTFT SLO, or whose decode alone exceeds its TPOT SLO, has none.
Queueing is free in the fluid model, so this is an upper bound, not a capacity at SLO.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from models.capacity import Slo
from placement.domain.fleet import Fleet, ReplicaSpec
from sim.costmodel.base import IterationCostModel
from sim.costmodel.factory import cost_model_for_replica

ENGINE_SOURCE = "simulator engine (fluid)"


@dataclass
class _EngineKind:
    spec: ReplicaSpec
    slos: list[Slo] = field(default_factory=list)
    _cache: dict[tuple[int, int, int, int], float] = field(default_factory=dict)

    def slo_index(self, slo: Slo) -> int:
        if slo not in self.slos:
            self.slos.append(slo)
        return self.slos.index(slo)

    def lookup(self, mean_input_tokens: float, output_tokens: float, slo_index: int) -> float:
        return self.lookup_cached(mean_input_tokens, 0.0, output_tokens, slo_index)

    def lookup_cached(
        self, uncached_tokens: float, cached_tokens: float, output_tokens: float, slo_index: int
    ) -> float:
        """:meth:`lookup` for a prompt of ``uncached_tokens`` to compute after
        ``cached_tokens`` found in the cache."""
        key = (round(uncached_tokens), round(cached_tokens), round(output_tokens), slo_index)
        if key not in self._cache:
            self._cache[key] = self._rate(key[0], key[2], self.slos[slo_index], cached=key[1])
        return self._cache[key]

    def _rate(self, uncached: int, output: int, slo: Slo, *, cached: int = 0) -> float:
        spec = self.spec
        cost = cost_model_for_replica(spec)
        uncached = max(uncached, 1)
        context = cached + uncached
        alone = cost.iteration_s([], 1, context + output) if output > 1 else 0.0
        full = spec.max_num_batched_tokens
        attention = 0.0
        first_token = 0.0  # the prompt's prefill alone, chunk by chunk
        done = 0
        while done < uncached:
            chunk = min(full, uncached - done)
            chunk_attention = cost.prefill_attention_s(chunk, cached + done)
            attention += chunk_attention
            first_token += cost.overhead_s + cost.linear_s(chunk) + chunk_attention
            done += chunk
        if first_token > slo.ttft_p95_s or alone > slo.tpot_p95_s:
            return 0.0
        per_token = (cost.overhead_s + cost.linear_s(full)) / full
        batch = _largest_batch(cost, spec.max_num_seqs, context + output / 2, slo.tpot_p95_s)
        d0, d1 = cost.decode_attention_coeffs(batch)
        attention += max(output - 1, 0) * (d0 / batch + d1 * (context + output / 2))
        return 1.0 / max((uncached + output) * per_token + attention, 1e-12)


def _largest_batch(cost: IterationCostModel, most: int, context: float, tpot_s: float) -> int:
    """The largest decode batch (1 … ``most``) of sequences at ``context`` tokens whose
    iteration takes at most ``tpot_s`` (1 when none does: the caller checked one alone)."""
    lo, hi = 1, max(1, most)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if cost.iteration_s([], mid, round(mid * context)) <= tpot_s:
            lo = mid
        else:
            hi = mid - 1
    return lo


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
