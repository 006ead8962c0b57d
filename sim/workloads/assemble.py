"""Turn per-request columns into a :class:`Workload` in the shape every loader promises.

The promise: requests sorted by ``arrival_s`` (a stable sort, so ties keep their input order),
the first arriving at 0.0 s, ids ``0..N-1`` in arrival order, ``model`` left empty (the fleet
decides). Loaders build numpy columns; this module does the sorting, re-timing and object
creation once, so they all agree.
"""

from __future__ import annotations

import gc
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager

import numpy as np
import numpy.typing as npt

from placement.domain.requests import Request, Tenant
from sim.workloads.base import Workload

NO_BLOCKS: tuple[int, ...] = ()


def assemble(
    name: str,
    *,
    arrival_s: npt.ArrayLike,
    input_tokens: npt.ArrayLike,
    output_tokens: npt.ArrayLike,
    tenant_index: npt.ArrayLike,
    tenant_names: Sequence[str],
    class_index: npt.ArrayLike,
    class_names: Sequence[str],
    tenants: dict[str, Tenant],
    block_hashes: Sequence[tuple[int, ...]] | None = None,
    block_tokens: int = 512,
    limit: int | None = None,
) -> Workload:
    """A workload from parallel per-request columns (any order).

    ``tenant_index``/``class_index`` index into ``tenant_names``/``class_names``;
    ``block_hashes`` is one tuple per request or None for traces without prefix information.
    ``limit`` keeps the first ``limit`` requests in arrival order.
    """
    arrivals = np.asarray(arrival_s, dtype=np.float64)
    order = np.argsort(arrivals, kind="stable")
    if limit is not None:
        order = order[: max(limit, 0)]
    t = arrivals[order]
    if t.size:
        t = t - t[0]
    tenant_of = [tenant_names[i] for i in np.asarray(tenant_index, dtype=np.int64)[order].tolist()]
    class_of = [class_names[i] for i in np.asarray(class_index, dtype=np.int64)[order].tolist()]
    hashes: Iterable[tuple[int, ...]]
    if block_hashes is None:
        hashes = [NO_BLOCKS] * len(order)
    else:
        hashes = [block_hashes[i] for i in order.tolist()]
    with _gc_paused():
        requests = _requests(
            t=t,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            order=order,
            tenant_of=tenant_of,
            class_of=class_of,
            hashes=hashes,
            block_tokens=block_tokens,
        )
    return Workload(name=name, requests=requests, tenants=tenants, block_tokens=block_tokens)


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while millions of requests are created.

    Request objects are GC-tracked, so the collector would otherwise rescan the growing list
    again and again (it makes creation ~3x slower). Nothing created here forms a cycle.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _requests(
    *,
    t: npt.NDArray[np.float64],
    input_tokens: npt.ArrayLike,
    output_tokens: npt.ArrayLike,
    order: npt.NDArray[np.intp],
    tenant_of: list[str],
    class_of: list[str],
    hashes: Iterable[tuple[int, ...]],
    block_tokens: int,
) -> list[Request]:
    return [
        Request(
            i,
            arrival,
            n_in,
            n_out,
            tenant=tenant,
            request_class=cls,
            block_hashes=h,
            block_tokens=block_tokens,
        )
        for i, (arrival, n_in, n_out, tenant, cls, h) in enumerate(
            zip(
                t.tolist(),
                np.asarray(input_tokens, dtype=np.int64)[order].tolist(),
                np.asarray(output_tokens, dtype=np.int64)[order].tolist(),
                tenant_of,
                class_of,
                hashes,
                strict=True,
            )
        )
    ]


def merge(name: str, parts: Sequence[Workload], tenants: dict[str, Tenant]) -> Workload:
    """Several workloads merged by arrival time (each keeps its own clock, all start at 0).

    Requests are copied (fresh ids in merged arrival order); ties keep the order of ``parts``.
    All parts must use the same ``block_tokens``.
    """
    sizes = {p.block_tokens for p in parts}
    if len(sizes) > 1:
        raise ValueError(f"cannot merge workloads with different block sizes {sorted(sizes)}")
    every = [r for p in parts for r in p.requests]
    class_names = sorted({r.request_class for r in every})
    class_pos = {c: i for i, c in enumerate(class_names)}
    tenant_names = sorted({r.tenant for r in every})
    tenant_pos = {n: i for i, n in enumerate(tenant_names)}
    classes = {k: v for p in parts for k, v in p.classes.items()}
    merged = assemble(
        name,
        arrival_s=[r.arrival_s for r in every],
        input_tokens=[r.input_tokens for r in every],
        output_tokens=[r.output_tokens for r in every],
        tenant_index=[tenant_pos[r.tenant] for r in every],
        tenant_names=tenant_names,
        class_index=[class_pos[r.request_class] for r in every],
        class_names=class_names,
        tenants=tenants,
        block_hashes=[r.block_hashes for r in every],
        block_tokens=sizes.pop() if sizes else 512,
    )
    merged.classes = classes
    return merged
