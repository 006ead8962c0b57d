"""The fluid bound's KV capacity: a warm prefix takes cache memory, and a replica has so much.

With a perfect *unbounded* cache the bound lets every replica hold every prefix ever seen, so
on traffic whose hot prefixes outgrow the caches (``kv-bound``) it counts hits no fleet can
have. Here a prefix reused in the window is a **reuse group** and serving its requests warm
needs it held:

* **Groups.** A request's perfect-cache hit ends at its deepest block seen before; that block
  names its group. A group's memory ``kv(g)`` is its tokens beyond the deepest other group on
  its chain (nested prefixes, e.g. a conversation's turns, are charged once; charging less
  than the real footprint keeps this an upper bound).
* **Variables**, per slice: ``warm[d, k]`` (served with the prefix held, at the uncached
  prompt's capacity), ``cold[d, k]`` (served without it, at the whole prompt's capacity) and
  ``held[g, k] ∈ [0, n_k]``: replicas of kind ``k`` holding group ``g`` (time-averaged).
* **Rows**, per slice: demand ``Σ_k warm + cold ≤ rate[d]``; time ``Σ_d warm/cap + cold/cap_cold
  ≤ n_k``; warm time only on replicas holding the group, ``Σ_{d ∈ g} warm/cap ≤ held[g, k]``;
  a group held for a share of the slice serves at most that share of its requests warm
  (arrivals are uniform within a slice), ``Σ_{d ∈ g} warm ≤ rate(g)·held[g, k]``: a prefix
  takes its memory between its requests too, not only while they run; memory
  ``Σ_g kv(g)·held[g, k] ≤ n_k · kv_capacity(k)`` (a replica's whole KV memory: the running
  sequences' own tokens are not charged, which keeps it a bound).

Requests with no reuse (group ``-1``) have one variable at their (whole-prompt) capacity.
Adapter loads (:func:`load_columns`, step 5 of :mod:`bench.loop.bound`) take replica time in
this program as in the one without KV capacity.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy.optimize import linprog
from scipy.sparse import csr_matrix

from bench.loop.bound_pools import Pool, pool_rows
from placement.domain.requests import Request
from placement.errors import PlacementError

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


#: (slice, seconds of adapter loads it needs at least, the kinds that can take them)
LoadNeed = tuple[int, float, list[int]]


@dataclass(frozen=True, slots=True, kw_only=True)
class LoadColumns:
    """Columns ``l[t, k]`` (seconds of loads on kind ``k`` in slice ``t``) and their rows."""

    rows: IntArray
    cols: IntArray
    data: FloatArray
    b_ub: FloatArray  # one per need row, appended after ``first_row``
    n_cols: int


def load_columns(
    needs: Sequence[LoadNeed],
    *,
    time_row0: int,
    n_kinds: int,
    first_row: int,
    first_col: int,
    replicas: FloatArray,
    slice_len: FloatArray,
) -> LoadColumns:
    """A need's row ``−Σ_k l[t, k] ≤ −seconds``; each ``l[t, k]`` takes ``1 / slice length`` of
    kind ``k``'s time row (``time_row0 + t · n_kinds + k``)."""
    rows: list[int] = []
    cols: list[int] = []
    data: list[float] = []
    b_ub: list[float] = []
    col = first_col
    for i, (t, need, kinds) in enumerate(needs):
        # loads cannot take more than the kinds' whole time (the LP stays feasible)
        secs = min(need, float(sum(replicas[k] for k in kinds)) * float(slice_len[t]))
        for k in kinds:
            rows += [first_row + i, time_row0 + t * n_kinds + k]
            cols += [col, col]
            data += [-1.0, 1.0 / float(slice_len[t])]
            col += 1
        b_ub.append(-secs)
    return LoadColumns(
        rows=np.asarray(rows, dtype=np.int64),
        cols=np.asarray(cols, dtype=np.int64),
        data=np.asarray(data, dtype=np.float64),
        b_ub=np.asarray(b_ub, dtype=np.float64),
        n_cols=col - first_col,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class ReuseGroups:
    """Per request (arrival order) its group (``-1``: no reuse); per group its KV tokens."""

    group: IntArray
    kv_tokens: FloatArray


def reuse_groups(ordered: Sequence[Request], block_tokens: int) -> ReuseGroups:
    """The reuse groups of requests in arrival order (see the module docstring)."""
    seen: set[int] = set()
    node: list[int] = []  # per request: its deepest block seen before, or -1
    chain_of: dict[int, tuple[int, ...]] = {}  # group node -> its chain up to it
    for r in ordered:
        hits = 0
        for h in r.block_hashes:
            if h not in seen:
                break
            hits += 1
        if hits:
            key = r.block_hashes[hits - 1]
            node.append(key)
            chain_of.setdefault(key, tuple(r.block_hashes[:hits]))
        else:
            node.append(-1)
        seen.update(r.block_hashes)
    keys = list(chain_of)
    index = {k: i for i, k in enumerate(keys)}
    kv = np.empty(len(keys))
    for i, key in enumerate(keys):
        chain = chain_of[key]
        parent_depth = 0
        for depth in range(len(chain) - 1, 0, -1):
            if chain[depth - 1] in index:
                parent_depth = depth
                break
        kv[i] = (len(chain) - parent_depth) * block_tokens
    group = np.asarray([index[k] if k != -1 else -1 for k in node], dtype=np.int64)
    return ReuseGroups(group=group, kv_tokens=kv)


def solve_with_kv(
    *,
    slice_index: IntArray,
    group: IntArray,
    rate: FloatArray,
    cap: FloatArray,
    cap_cold: FloatArray,
    kv_tokens: FloatArray,
    replicas: FloatArray,
    kv_capacity: FloatArray,
    slice_len: FloatArray,
    n_slices: int,
    loads: Sequence[LoadNeed] = (),
    pools: Sequence[Pool] = (),
) -> float:
    """Requests served over the window by the per-slice LP with KV capacity (``pools``: kinds
    that share replica time, :mod:`bench.loop.bound_pools`).

    Per cell ``d``: ``slice_index``, ``group`` (``-1``: none), ``rate`` (req/s) and, per kind,
    ``cap`` (prefix held; the only capacity of cells with no group) and ``cap_cold``; per group
    ``kv_tokens``; per kind ``replicas`` and ``kv_capacity`` (tokens per replica)."""
    n_cells, n_kinds = cap.shape
    grouped = group >= 0
    a_cell, a_kind = np.nonzero(cap > 0)
    b_cell, b_kind = np.nonzero((cap_cold > 0) & grouped[:, None])
    # held[j, k] for every (slice, group) j and kind k some warm variable uses
    warm_grouped = grouped[a_cell]
    pair = np.stack([slice_index[a_cell[warm_grouped]], group[a_cell[warm_grouped]]], axis=1)
    if len(pair):
        sg, sg_of_warm = np.unique(pair, axis=0, return_inverse=True)
        sg_of_warm = sg_of_warm.ravel()
    else:
        sg, sg_of_warm = np.zeros((0, 2), dtype=np.int64), np.zeros(0, dtype=np.int64)
    hk = np.stack([sg_of_warm, a_kind[warm_grouped]], axis=1)
    if len(hk):
        held, held_of_warm = np.unique(hk, axis=0, return_inverse=True)
        held_of_warm = held_of_warm.ravel()
    else:
        held, held_of_warm = np.zeros((0, 2), dtype=np.int64), np.zeros(0, dtype=np.int64)
    n_a, n_b, n_h = len(a_cell), len(b_cell), len(held)
    if n_a + n_b == 0:
        return 0.0
    a_var = np.arange(n_a)
    b_var = n_a + np.arange(n_b)
    h_var = n_a + n_b + np.arange(n_h)

    rows: list[IntArray] = []
    cols: list[IntArray] = []
    data: list[FloatArray] = []
    # demand, one row per cell
    rows += [a_cell, b_cell]
    cols += [a_var, b_var]
    data += [np.ones(n_a), np.ones(n_b)]
    # replica time, one row per (slice, kind)
    r0 = n_cells
    rows += [
        r0 + slice_index[a_cell] * n_kinds + a_kind,
        r0 + slice_index[b_cell] * n_kinds + b_kind,
    ]
    cols += [a_var, b_var]
    data += [1.0 / cap[a_cell, a_kind], 1.0 / cap_cold[b_cell, b_kind]]
    # warm time on replicas holding the group, one row per held variable
    r1 = r0 + n_slices * n_kinds
    warm_vars = a_var[warm_grouped]
    rows += [r1 + held_of_warm, r1 + np.arange(n_h)]
    cols += [warm_vars, h_var]
    data += [1.0 / cap[a_cell[warm_grouped], a_kind[warm_grouped]], -np.ones(n_h)]
    # warm requests at most the held share of the group's, one row per held variable
    r15 = r1 + n_h
    sg_rate = np.zeros(len(sg))
    if len(sg):
        cell_sg = np.full(n_cells, -1, dtype=np.int64)
        cell_sg[a_cell[warm_grouped]] = sg_of_warm
        has = cell_sg >= 0
        sg_rate = np.bincount(cell_sg[has], rate[has], len(sg)).astype(np.float64)
    rows += [r15 + held_of_warm, r15 + np.arange(n_h)]
    cols += [warm_vars, h_var]
    data += [np.ones(len(warm_vars)), -sg_rate[held[:, 0]] if n_h else np.zeros(0)]
    # memory, one row per (slice, kind)
    r2 = r15 + n_h
    held_slice = sg[held[:, 0], 0] if n_h else np.zeros(0, dtype=np.int64)
    held_group = sg[held[:, 0], 1] if n_h else np.zeros(0, dtype=np.int64)
    rows += [r2 + held_slice * n_kinds + held[:, 1]]
    cols += [h_var]
    data += [kv_tokens[held_group]]
    n_rows = r2 + n_slices * n_kinds
    n_vars = n_a + n_b + n_h
    extra = load_columns(
        loads,
        time_row0=r0,
        n_kinds=n_kinds,
        first_row=n_rows,
        first_col=n_vars,
        replicas=replicas,
        slice_len=slice_len,
    )
    rows.append(extra.rows)
    cols.append(extra.cols)
    data.append(extra.data)
    shared = pool_rows(
        np.concatenate(rows),
        np.concatenate(cols),
        np.concatenate(data),
        pools=pools,
        time_row0=r0,
        n_kinds=n_kinds,
        n_slices=n_slices,
        first_row=n_rows + len(extra.b_ub),
    )
    rows.append(shared.rows)
    cols.append(shared.cols)
    data.append(shared.data)
    a_ub = csr_matrix(
        (np.concatenate(data), (np.concatenate(rows), np.concatenate(cols))),
        shape=(n_rows + len(extra.b_ub) + len(shared.b_ub), n_vars + extra.n_cols),
    )
    b_ub = np.concatenate(
        [
            rate,
            np.tile(replicas, n_slices),
            np.zeros(n_h),
            np.zeros(n_h),
            np.tile(replicas * kv_capacity, n_slices),
            extra.b_ub,
            shared.b_ub,
        ]
    )
    weight = np.concatenate(
        [
            slice_len[slice_index[a_cell]],
            slice_len[slice_index[b_cell]],
            np.zeros(n_h + extra.n_cols),
        ]
    )
    upper = np.concatenate(
        [
            np.full(n_a + n_b, np.inf),
            replicas[held[:, 1]] if n_h else np.zeros(0),
            np.full(extra.n_cols, np.inf),
        ]
    )
    bounds = np.stack([np.zeros(len(upper)), upper], axis=1)
    result = linprog(-weight, A_ub=a_ub, b_ub=b_ub, bounds=bounds, method="highs")
    if result.status != 0:
        raise PlacementError(f"the fluid bound LP (KV capacity) did not solve: {result.message}")
    return float(-result.fun)
