"""The fluid bound with base models free to move: replicas that may hold several models.

A replica that may hold any of several base models (``ReplicaSpec.models``) counts in the
bound as a replica of every kind it could be, ``(accelerator, model, tp)`` for each of its
models, and the kinds it shares form a *pool*: per slice, the replica time all of a pool's
kinds use together is at most its replicas (and those of the same kinds that cannot move).
Models move between a pool's replicas freely and at once, slice by slice — no drain, no load
time — which keeps the program a relaxation of what any plan can do, hence an upper bound.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class Pool:
    """Kinds (indices) whose replica time is shared, and the replicas that share it."""

    kinds: tuple[int, ...]
    replicas: float


@dataclass(frozen=True, slots=True, kw_only=True)
class PoolRows:
    rows: IntArray
    cols: IntArray
    data: FloatArray
    b_ub: FloatArray


def pool_rows(
    rows: IntArray,
    cols: IntArray,
    data: FloatArray,
    *,
    pools: Sequence[Pool],
    time_row0: int,
    n_kinds: int,
    n_slices: int,
    first_row: int,
) -> PoolRows:
    """One row per (slice, pool): the sum of its kinds' time rows (the entries of the program
    ``rows``/``cols``/``data`` in rows ``time_row0 + t · n_kinds + k``), at most its replicas."""
    empty = PoolRows(
        rows=np.zeros(0, dtype=np.int64),
        cols=np.zeros(0, dtype=np.int64),
        data=np.zeros(0),
        b_ub=np.zeros(0),
    )
    if not pools:
        return empty
    pool_of = np.full(n_kinds, -1, dtype=np.int64)
    for p, pool in enumerate(pools):
        pool_of[list(pool.kinds)] = p
    offset = rows - time_row0
    is_time = (offset >= 0) & (offset < n_slices * n_kinds)
    kind = np.where(is_time, offset % n_kinds, 0)
    keep = is_time & (pool_of[kind] >= 0)
    t = offset[keep] // n_kinds
    return PoolRows(
        rows=first_row + t * len(pools) + pool_of[kind[keep]],
        cols=cols[keep],
        data=data[keep],
        b_ub=np.tile(np.asarray([p.replicas for p in pools], dtype=np.float64), n_slices),
    )
