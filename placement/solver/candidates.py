"""Candidate pruning: which (demand unit, replica) pairs get a variable at all.

Each unit gets ``k`` replicas of its model pool drawn without replacement with probability
proportional to their capacity at SLO for it (Gumbel top-k, seeded by the unit's key so a
re-solve draws the same replicas). Weighting by capacity makes the expected candidate load of
a replica proportional to what it can take, and a random bipartite graph of degree ``k``
spreads load almost as well as the complete one; cost is left to the objective. A unit whose
rate needs many replicas gets enough of them (``2 × rate / mean capacity`` more), and the
replicas the previous plan routed the unit to are always kept (continuity, warm caches).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from placement.solver.instance import FloatArray, Instance, IntArray

TOP_K = 8
# Units per slice of the (units × pool replicas) score matrix: bounds memory at ~8 MB.
_SLICE_CELLS = 1_000_000


@dataclass(frozen=True, slots=True)
class Candidates:
    """Pairs ``(unit[p], replica[p])``, sorted by unit then replica."""

    unit: IntArray
    replica: IntArray

    def __len__(self) -> int:
        return len(self.unit)


def _gumbel(seeds: IntArray, n: int) -> FloatArray:
    # splitmix-style hash of (seed, column) → uniform (0, 1): deterministic per unit
    cols = np.arange(n, dtype=np.uint64)
    z = seeds.astype(np.uint64)[:, None] * np.uint64(0x9E3779B97F4A7C15) + cols[None, :]
    z ^= z >> np.uint64(30)
    z *= np.uint64(0xBF58476D1CE4E5B9)
    z ^= z >> np.uint64(27)
    z *= np.uint64(0x94D049BB133111EB)
    z ^= z >> np.uint64(31)
    u = (z >> np.uint64(11)).astype(np.float64) / float(1 << 53)
    out: FloatArray = -np.log(-np.log(np.clip(u, 1e-12, 1 - 1e-12)))
    return out


def select_candidates(
    inst: Instance,
    *,
    top_k: int = TOP_K,
    keep_unit: IntArray | None = None,
    keep_replica: IntArray | None = None,
) -> Candidates:
    """Candidate pairs of every unit (``keep_*``: pairs always kept, e.g. the previous plan's)."""
    units: list[IntArray] = []
    reps: list[IntArray] = []
    with np.errstate(all="ignore"):
        for m in range(len(inst.models)):
            pool = np.flatnonzero((inst.replica_model == m) & inst.replica_healthy)
            d_all = np.flatnonzero(inst.unit_model == m)
            if len(pool) == 0 or len(d_all) == 0:
                continue
            step = max(1, _SLICE_CELLS // len(pool))
            for lo in range(0, len(d_all), step):
                d = d_all[lo : lo + step]
                cap = inst.capacity[d][:, inst.replica_kind[pool]]  # [d, pool]
                if inst.replica_classes.size:
                    cap = np.where(inst.replica_classes[pool][:, inst.unit_class[d]].T, cap, 0.0)
                mean_cap = np.maximum(cap.mean(axis=1), 1e-12)
                need = np.ceil(2.0 * inst.unit_rate[d] / mean_cap).astype(np.int64)
                k = np.minimum(top_k + need, len(pool))
                score = np.where(cap > 0, np.log(cap), -np.inf) + _gumbel(
                    inst.unit_key[d] * 7919 + d, len(pool)
                )
                kmax = int(k.max())
                if kmax < len(pool):
                    top = np.argpartition(-score, kmax - 1, axis=1)[:, :kmax]
                else:
                    top = np.tile(np.arange(len(pool)), (len(d), 1))
                top_score = np.take_along_axis(score, top, axis=1)
                order = np.argsort(-top_score, axis=1)
                top = np.take_along_axis(top, order, axis=1)
                top_score = np.take_along_axis(top_score, order, axis=1)
                keep = (np.arange(top.shape[1])[None, :] < k[:, None]) & np.isfinite(top_score)
                rows = np.broadcast_to(d[:, None], top.shape)
                units.append(rows[keep])
                reps.append(pool[top[keep]])
    if keep_unit is not None and keep_replica is not None and len(keep_unit):
        ok = (inst.replica_model[keep_replica] == inst.unit_model[keep_unit]) & (
            inst.replica_healthy[keep_replica]
        )
        units.append(keep_unit[ok])
        reps.append(keep_replica[ok])
    if not units:
        empty = np.zeros(0, dtype=np.int64)
        return Candidates(empty, empty)
    code = np.unique(
        np.concatenate(units).astype(np.int64) * inst.n_replicas + np.concatenate(reps)
    )
    unit, replica = code // inst.n_replicas, code % inst.n_replicas
    # a replica the plan keeps apart from a class (:mod:`placement.solver.chunk_split`)
    keep = inst.serves(unit, replica)
    return Candidates(unit[keep], replica[keep])
