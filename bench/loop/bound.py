"""The fluid upper bound on goodput at SLO: the yardstick the closed-loop benchmark reports its
"share of bound" against.

No router and no solver can do better than this on a window of requests: it is the LP
relaxation of placement with a *perfect* prefix cache (every block ever seen stays warm on every
replica) and *perfect* knowledge of the window's demand, slice by slice.

1. Perfect cache. In arrival order, a request's cached tokens are ``block_tokens`` × its leading
   block hashes already seen (at most ``input − 1``, since the last token is always computed).
2. Demand. The window is cut into slices by arrival; in each slice requests are bucketed by
   (model, class, uncached prompt, output) on a geometric grid (factor 2), and a bucket asks for
   its count / slice length req/s at its mean uncached prompt and mean output.
3. Capacity. A replica kind (accelerator, model, tp) has ``cap[d, k]`` req/s of capacity at the
   SLO of bucket ``d``'s class if it served ``d`` alone, 0 when it serves another model.
4. Fluid LP, per slice. ``s[d, k] ≥ 0`` req/s of ``d`` served on kind ``k``;
   ``Σ_k s[d, k] ≤ rate[d]`` and ``Σ_d s[d, k] / cap[d, k] ≤ healthy replicas of k`` (time
   sharing: each unit of ``d`` uses ``1 / cap`` of a replica). Maximise ``Σ s``.
5. LoRA adapters (``adapters`` given). Placement is free, but loads are not: in slice ``t`` the
   ``A`` distinct adapters requested on base model ``m`` must be resident, and the pool's
   ``S`` slots (Σ ``max_loras``) held at most ``S`` of them when the slice began — none in the
   first slice, which starts cold as the simulator does. So at least ``A`` (first slice) or
   ``A − S`` loads happen, each stalling one replica for its load time; the cheapest such
   loads, at the fastest load bandwidth of the pool, are the least replica time they take.
   ``l[t, k] ≥ 0`` seconds of loads on kind ``k``: ``Σ_k l[t, k] ≥ that time`` and each
   kind's time row gains ``l[t, k] / slice length``. Slots do not cap concurrency in the fluid
   model (a looser, still valid, bound), and weights enter through each kind's own engine
   costs (its model, its TP) — KV capacity is not a limit here (perfect cache).

All slices go into one block-diagonal LP (they share no variable), solved once with HiGHS.

6. Base models (:mod:`bench.loop.bound_pools`): a replica that may hold several base models
   counts for every kind it could be, and those kinds share its time (a pool row per slice).

7. KV capacity (``kv_capacity=True``, the default): the cache is perfect but not unbounded. A
   reused prefix must be held in a replica's KV memory for its requests to be served warm,
   and a replica holds only so much (:mod:`bench.loop.bound_kv`); cells are then also keyed by
   the prefix they reuse, and may be served cold at the whole prompt's capacity.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt
from scipy.optimize import linprog
from scipy.sparse import csr_matrix

from bench.loop.bound_kv import LoadColumns, load_columns, reuse_groups, solve_with_kv
from bench.loop.bound_pools import Pool, PoolRows, pool_rows
from models.capacity import Slo
from placement.domain.adapters import LoraAdapter, lora_load_s
from placement.domain.fleet import Fleet, ReplicaSpec, with_model
from placement.domain.llm import ModelArchitecture, get_model
from placement.domain.requests import Request, RequestClass
from placement.errors import InputError, PlacementError
from placement.solver.capacity import CapacitySource

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

DEFAULT_SLICE_S = 30.0
# bucket edges are powers of two: a bucket's mean is within a factor 2 of each member's length,
# close enough for capacity tables whose own grid is geometric
BUCKET_RATIO = 2.0


@dataclass(frozen=True, slots=True, kw_only=True)
class FluidBound:
    """The bound and what it is measured against, all in req/s over the window."""

    goodput_rps: float  # requests/s that can meet their SLO, over the window
    offered_rps: float  # all requests / window
    reachable_rps: float  # requests whose SLO some healthy replica kind holds even unloaded
    slices: int
    slice_s: float


@runtime_checkable
class CachedCapacityLookup(Protocol):
    """A capacity table that charges a prompt's cached part its attention cost."""

    def lookup_cached(
        self, uncached_tokens: float, cached_tokens: float, output_tokens: float, slo_index: int
    ) -> float: ...


@dataclass(frozen=True, slots=True)
class _Kind:
    accelerator: str
    model: str
    tp: int


@dataclass(frozen=True, slots=True, kw_only=True)
class _Cells:
    """Demand per (slice, model, class, reused prefix, uncached bucket, prompt bucket, output
    bucket); ``group`` is -1 for every cell when KV capacity is not modelled."""

    slice_index: IntArray
    model: list[str]
    request_class: list[str]
    count: FloatArray
    mean_uncached: FloatArray
    mean_output: FloatArray
    group: IntArray
    mean_input: FloatArray


def fluid_bound(
    requests: Sequence[Request],
    fleet: Fleet,
    classes: Mapping[str, RequestClass],
    capacity: CapacitySource,
    *,
    block_tokens: int,
    slice_s: float = DEFAULT_SLICE_S,
    window_s: float | None = None,
    unhealthy: Collection[str] = (),
    adapters: Mapping[str, LoraAdapter] | None = None,
    kv_capacity: bool = True,
) -> FluidBound:
    """The fluid upper bound on goodput at SLO of ``requests`` on the healthy part of ``fleet``.

    The window starts at the first arrival and lasts ``window_s`` (default: the span of the
    arrivals, at least one slice); arrivals after its end count in its last slice. A request
    with no model takes the fleet's model when the fleet serves exactly one; otherwise no kind
    serves it and it is unreachable. ``kv_capacity=False`` gives every replica an unbounded
    cache (step 5 off).
    """
    _validate(requests, fleet, classes, block_tokens, slice_s, window_s, unhealthy)
    if not requests:
        return FluidBound(
            goodput_rps=0.0, offered_rps=0.0, reachable_rps=0.0, slices=0, slice_s=slice_s
        )
    ordered = sorted(requests, key=lambda r: r.arrival_s)
    arrival = np.fromiter((r.arrival_s for r in ordered), np.float64, len(ordered))
    start = float(arrival[0])
    window = window_s if window_s is not None else max(float(arrival[-1]) - start, slice_s)
    n_slices = max(1, int(np.ceil(window / slice_s - 1e-9)))
    slice_len = np.full(n_slices, slice_s)
    slice_len[-1] = window - slice_s * (n_slices - 1)
    slice_of = np.minimum(((arrival - start) // slice_s).astype(np.int64), n_slices - 1)

    only_model = next(iter(fleet.models)) if len(fleet.models) == 1 else ""
    uncached = _perfect_cache_uncached(ordered, block_tokens)
    reuse = reuse_groups(ordered, block_tokens) if kv_capacity else None
    group = reuse.group if reuse is not None else np.full(len(ordered), -1, dtype=np.int64)
    cells = _cells(ordered, uncached, slice_of, only_model, group)
    kinds, replicas, pools = _healthy_kinds(fleet, set(unhealthy))
    cached = np.maximum(cells.mean_input - cells.mean_uncached, 0.0)
    cap = _capacity_matrix(cells, kinds, classes, capacity, cells.mean_uncached, cached)

    reachable_cells = cap.max(axis=1, initial=0.0) > 0
    reachable = int(cells.count[reachable_cells].sum())
    loads = _load_seconds(ordered, slice_of, n_slices, fleet, kinds, adapters or {}, only_model)
    if reuse is None:
        served = _solve(cells, cap, replicas, slice_len, n_slices, loads, pools)
    else:
        served = solve_with_kv(
            slice_index=cells.slice_index,
            group=cells.group,
            rate=cells.count / slice_len[cells.slice_index],
            cap=cap,
            cap_cold=_capacity_matrix(cells, kinds, classes, capacity, cells.mean_input),
            kv_tokens=reuse.kv_tokens,
            replicas=replicas,
            kv_capacity=_kind_kv_tokens(fleet, kinds),
            slice_len=slice_len,
            n_slices=n_slices,
            loads=list(zip(loads.slice_index, loads.seconds, loads.kinds, strict=True)),
            pools=pools,
        )
    return FluidBound(
        goodput_rps=served / window,
        offered_rps=len(ordered) / window,
        reachable_rps=reachable / window,
        slices=n_slices,
        slice_s=slice_s,
    )


def _validate(
    requests: Sequence[Request],
    fleet: Fleet,
    classes: Mapping[str, RequestClass],
    block_tokens: int,
    slice_s: float,
    window_s: float | None,
    unhealthy: Collection[str],
) -> None:
    if not slice_s > 0:
        raise InputError(f"slice_s={slice_s}", field="slice_s", expected="a positive duration")
    if block_tokens < 1:
        raise InputError(
            f"block_tokens={block_tokens}", field="block_tokens", expected="at least 1"
        )
    if window_s is not None and not window_s > 0:
        raise InputError(f"window_s={window_s}", field="window_s", expected="a positive duration")
    unknown = set(unhealthy) - {r.id for r in fleet.replicas}
    if unknown:
        raise InputError(
            f"unknown replica {sorted(unknown)[0]!r}", field="unhealthy", expected="fleet ids"
        )
    missing = {r.request_class for r in requests} - set(classes)
    if missing:
        raise InputError(
            f"unknown request class {sorted(missing)[0]!r}",
            field="request_class",
            expected="one of " + ", ".join(sorted(classes)),
        )


def _perfect_cache_uncached(ordered: Sequence[Request], block_tokens: int) -> FloatArray:
    """Uncached prompt tokens of each request (in arrival order) under a cache that keeps every
    block it has ever seen."""
    seen: set[int] = set()
    uncached = np.empty(len(ordered), dtype=np.float64)
    for i, r in enumerate(ordered):
        hits = 0
        for h in r.block_hashes:
            if h not in seen:
                break
            hits += 1
        cached = min(hits * block_tokens, max(r.input_tokens - 1, 0))
        uncached[i] = r.input_tokens - cached
        seen.update(r.block_hashes)
    return uncached


def _geometric_bucket(tokens: FloatArray) -> IntArray:
    exponent = np.log(np.maximum(tokens, 1.0)) / np.log(BUCKET_RATIO)
    bucket: IntArray = np.floor(exponent).astype(np.int64)
    return bucket


def _cells(
    ordered: Sequence[Request],
    uncached: FloatArray,
    slice_of: IntArray,
    only_model: str,
    group: IntArray,
) -> _Cells:
    models, model_index = np.unique(
        np.asarray([r.model or only_model for r in ordered], dtype=str),
        return_inverse=True,
    )
    names, class_index = np.unique(
        np.asarray([r.request_class for r in ordered], dtype=str), return_inverse=True
    )
    output = np.fromiter((r.output_tokens for r in ordered), np.float64, len(ordered))
    prompt = np.fromiter((r.input_tokens for r in ordered), np.float64, len(ordered))
    keys = np.stack(
        [
            slice_of,
            model_index.ravel(),
            class_index.ravel(),
            group,
            _geometric_bucket(uncached),
            _geometric_bucket(prompt),
            _geometric_bucket(output),
        ],
        axis=1,
    )
    unique, inverse = np.unique(keys, axis=0, return_inverse=True)
    inverse = inverse.ravel()
    count = np.bincount(inverse).astype(np.float64)
    return _Cells(
        slice_index=unique[:, 0],
        model=[str(m) for m in models[unique[:, 1]]],
        request_class=[str(c) for c in names[unique[:, 2]]],
        count=count,
        mean_uncached=np.bincount(inverse, weights=uncached) / count,
        mean_output=np.bincount(inverse, weights=output) / count,
        group=unique[:, 3],
        mean_input=np.bincount(inverse, weights=prompt) / count,
    )


def _candidates(r: ReplicaSpec) -> tuple[str, ...]:
    """The base models replica ``r`` may hold (its own when it cannot change)."""
    return r.models or (r.model.name,)


def _healthy_kinds(fleet: Fleet, unhealthy: set[str]) -> tuple[list[_Kind], FloatArray, list[Pool]]:
    """Replica kinds with at least one healthy replica, and how many each has (a replica that
    may hold several models counts in each of their kinds), and the pools those share."""
    counts: dict[_Kind, int] = {}
    groups: dict[tuple[_Kind, ...], int] = {}
    for r in fleet.replicas:
        if r.id not in unhealthy:
            own = tuple(_Kind(r.accelerator.kind, m, r.tp) for m in sorted(_candidates(r)))
            for kind in own:
                counts[kind] = counts.get(kind, 0) + 1
            if len(own) > 1:
                groups[own] = groups.get(own, 0) + 1
    kinds = list(counts)
    pools: list[Pool] = []
    for own, n in groups.items():
        index = tuple(kinds.index(k) for k in own)
        # the kinds' replicas that cannot move share nothing, but keep their own time
        fixed = sum(counts[k] for k in own) - n * len(own)
        pools.append(Pool(index, float(n + fixed)))
    return kinds, np.asarray(list(counts.values()), dtype=np.float64), pools


def _capacity_matrix(
    cells: _Cells,
    kinds: list[_Kind],
    classes: Mapping[str, RequestClass],
    capacity: CapacitySource,
    prompt: FloatArray,
    cached: FloatArray | None = None,
) -> FloatArray:
    """``cap[d, k]``: req/s one replica of kind ``k`` serves of cell ``d`` alone at its SLO, each
    cell's prompt computing ``prompt[d]`` tokens after ``cached[d]`` found cached (a source
    that can tell, like the engine's, charges attention over the cached part too)."""
    cap = np.zeros((len(cells.count), len(kinds)))
    for k, kind in enumerate(kinds):
        table = capacity.table(kind.accelerator, kind.model, kind.tp)
        slo_index: dict[str, int] = {}
        for d, (model, name) in enumerate(zip(cells.model, cells.request_class, strict=True)):
            if model != kind.model:
                continue
            if name not in slo_index:
                c = classes[name]
                slo_index[name] = table.slo_index(Slo(c.ttft_slo_s, c.tpot_slo_s))
            out = float(cells.mean_output[d])
            if isinstance(table, CachedCapacityLookup) and cached is not None:
                cap[d, k] = table.lookup_cached(
                    float(prompt[d]), float(cached[d]), out, slo_index[name]
                )
            else:
                cap[d, k] = table.lookup(float(prompt[d]), out, slo_index[name])
    return cap


def _kind_kv_tokens(fleet: Fleet, kinds: list[_Kind]) -> FloatArray:
    """KV memory (tokens) of one replica of each kind."""
    kv = {
        _Kind(r.accelerator.kind, m, r.tp): float(with_model(r, get_model(m)).kv_capacity_tokens)
        for r in fleet.replicas
        for m in _candidates(r)
    }
    return np.asarray([kv[k] for k in kinds], dtype=np.float64)


@dataclass(frozen=True, slots=True)
class _Loads:
    """Adapter load time each (slice, base model) needs at least, and the kinds that can
    take it: ``seconds[i]`` in slice ``slice_index[i]`` on any of ``kinds[i]``."""

    slice_index: list[int]
    seconds: list[float]
    kinds: list[list[int]]


def _load_seconds(
    ordered: Sequence[Request],
    slice_of: IntArray,
    n_slices: int,
    fleet: Fleet,
    kinds: list[_Kind],
    adapters: Mapping[str, LoraAdapter],
    only_model: str,
) -> _Loads:
    """The least adapter-load time of each slice and base model (module docstring, step 5)."""
    out = _Loads([], [], [])
    if not adapters:
        return out
    healthy = {(k.accelerator, k.model, k.tp) for k in kinds}
    slots: dict[str, int] = {}
    gbps: dict[str, float] = {}
    arch: dict[str, ModelArchitecture] = {}
    for spec in fleet.replicas:
        for m in _candidates(spec):
            if (spec.accelerator.kind, m, spec.tp) in healthy and spec.max_loras > 0:
                slots[m] = slots.get(m, 0) + spec.max_loras
                gbps[m] = max(gbps.get(m, 0.0), spec.lora_load_gbps)
                arch[m] = get_model(m)
    asked: dict[tuple[int, str], set[str]] = {}
    for r, t in zip(ordered, slice_of.tolist(), strict=True):
        model = r.model or only_model
        if r.adapter and model in slots:
            asked.setdefault((t, model), set()).add(r.adapter)
    for (t, model), names in sorted(asked.items()):
        need = len(names) if t == 0 else len(names) - slots[model]
        if need <= 0:
            continue
        times = sorted(lora_load_s(arch[model], adapters[a].rank, gbps=gbps[model]) for a in names)
        out.slice_index.append(t)
        out.seconds.append(float(sum(times[:need])))
        out.kinds.append([k for k, kind in enumerate(kinds) if kind.model == model])
    return out


#: A sparse program's entries (rows, columns, values) and its right-hand sides.
_Program = tuple[IntArray, IntArray, FloatArray, FloatArray]


def _appended(program: _Program, block: LoadColumns | PoolRows) -> _Program:
    """``program`` with ``block``'s entries and right-hand sides added after its own."""
    rows, cols, data, b_ub = program
    return (
        np.concatenate([rows, block.rows]),
        np.concatenate([cols, block.cols]),
        np.concatenate([data, block.data]),
        np.concatenate([b_ub, block.b_ub]),
    )


def _solve(
    cells: _Cells,
    cap: FloatArray,
    replicas: FloatArray,
    slice_len: FloatArray,
    n_slices: int,
    loads: _Loads | None = None,
    pools: Sequence[Pool] = (),
) -> float:
    """Requests served over the window by the fluid LP of every slice (one block-diagonal LP)."""
    cell, kind = np.nonzero(cap > 0)
    if len(cell) == 0:
        return 0.0
    n_cells, n_kinds = cap.shape
    n_vars = len(cell)
    var = np.arange(n_vars)
    # rows 0 … n_cells−1: a cell's demand; then one row per (slice, kind): replicas' time
    rows = np.concatenate([cell, n_cells + cells.slice_index[cell] * n_kinds + kind])
    cols = np.concatenate([var, var])
    data = np.concatenate([np.ones(n_vars), 1.0 / cap[cell, kind]])
    rate = cells.count / slice_len[cells.slice_index]
    b_ub = np.concatenate([rate, np.tile(replicas, n_slices)])
    # weighting by slice length makes the objective requests served, not req/s
    weight = slice_len[cells.slice_index[cell]]
    n_rows = n_cells + n_slices * n_kinds
    if loads is not None and loads.seconds:
        extra = load_columns(
            list(zip(loads.slice_index, loads.seconds, loads.kinds, strict=True)),
            time_row0=n_cells,
            n_kinds=n_kinds,
            first_row=n_rows,
            first_col=n_vars,
            replicas=replicas,
            slice_len=slice_len,
        )
        rows, cols, data, b_ub = _appended((rows, cols, data, b_ub), extra)
        n_rows += len(extra.b_ub)
        weight = np.concatenate([weight, np.zeros(extra.n_cols)])
        n_vars += extra.n_cols
    shared = pool_rows(
        rows,
        cols,
        data,
        pools=pools,
        time_row0=n_cells,
        n_kinds=n_kinds,
        n_slices=n_slices,
        first_row=n_rows,
    )
    rows, cols, data, b_ub = _appended((rows, cols, data, b_ub), shared)
    n_rows += len(shared.b_ub)
    a_ub = csr_matrix((data, (rows, cols)), shape=(n_rows, n_vars))
    result = linprog(-weight, A_ub=a_ub, b_ub=b_ub, bounds=(0, None), method="highs")
    if result.status != 0:
        raise PlacementError(f"the fluid bound LP did not solve: {result.message}")
    return float(-result.fun)
