"""Mixing tenants: each tenant of a tenants file sends the requests of its own source.

A tenants file whose every tenant names a ``source`` (a shipped workload: ``azure-conv``,
``azure-code``, ``servegen-reason``, ``mooncake`` …, see :data:`sim.workloads.registry.
WORKLOADS`) describes a population whose request shapes differ by tenant — reasoning (short
prompts, long outputs) beside code completion (long prompts, short outputs) — which relabelling
one trace's sessions (``traffic_share`` alone) cannot give.

Each source is cut to the same span and its requests all go to its tenant. With traffic shares
the tenants' request counts are brought to their ratio by thinning: every tenant keeps a
uniform random subset of its source (seeded, in arrival order), the largest that keeps the
ratio. Thinning keeps each source's length mix, prefix sharing and arrival shape; only its rate
falls. Two tenants may not share a source (they would send the very same requests). A tenant
with a ``request_class`` sends all its requests in that class (interactive chat beside batch
summarisation), else in the classes its source gives them.

The sources are loaded by the caller's ``load`` (the registry's :func:`load_workload`), so a
workload built from a mix (``tiers``) can be one of the registry's own.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping

import numpy as np

from placement.domain.requests import Request
from placement.domain.tenancy import Tenancy
from placement.errors import InputError
from sim.workloads.assemble import merge
from sim.workloads.base import Workload

DEFAULT_MIX_SPAN_S = 1800.0

#: ``load(source, seed, duration_s)``: a shipped workload by name, cut to its first seconds
SourceLoader = Callable[[str, int, float], Workload]


def mix_tenants(
    tenancy: Tenancy,
    load: SourceLoader,
    known: Collection[str],
    *,
    name: str,
    seed: int = 0,
    duration_s: float | None = None,
) -> Workload:
    """The workload of a tenants file with a ``source`` per tenant (one of ``known``, loaded
    by ``load``; see the module docstring)."""
    sources = dict(tenancy.sources)
    if not sources:
        raise InputError("no tenant names a source", field="tenants", expected="source: WORKLOAD")
    for tenant, source in sources.items():
        if source not in known:
            raise InputError(
                f"unknown source {source!r}",
                field=f"tenants.{tenant}.source",
                expected="one of " + ", ".join(known),
            )
    shared = sorted({s for s in sources.values() if list(sources.values()).count(s) > 1})
    if shared:
        raise InputError(
            f"tenants share the source {shared[0]!r}",
            field="tenants",
            expected="one source per tenant",
        )
    span = DEFAULT_MIX_SPAN_S if duration_s is None else duration_s
    parts: dict[str, list[Request]] = {}
    block_tokens = 512
    for tenant in sorted(sources):
        wl = load(sources[tenant], seed, span)
        if not wl.requests:
            raise InputError(
                f"source {sources[tenant]!r} has no request in the first {span:g} s",
                field=f"tenants.{tenant}.source",
            )
        block_tokens = wl.block_tokens
        parts[tenant] = wl.requests
    keep = _kept_counts({t: len(r) for t, r in parts.items()}, tenancy.traffic_shares)
    workloads = []
    for i, tenant in enumerate(sorted(parts)):
        requests = _thin(parts[tenant], keep[tenant], seed=seed, stream=i)
        cls = tenancy.request_classes.get(tenant)
        for r in requests:
            r.tenant = tenant
            if cls is not None:
                r.request_class = cls
        workloads.append(
            Workload(
                name=tenant,
                requests=requests,
                tenants={},
                classes=dict(tenancy.classes),
                block_tokens=block_tokens,
            )
        )
    mixed = merge(name, workloads, dict(tenancy.tenants))
    mixed.classes = dict(tenancy.classes)
    return mixed


def _kept_counts(counts: Mapping[str, int], shares: Mapping[str, float]) -> dict[str, int]:
    """Requests each tenant keeps: all of them without shares; with shares, the most that
    keeps the counts in the shares' ratio."""
    if not shares:
        return dict(counts)
    total = min(counts[t] / shares[t] for t in counts)
    return {t: max(1, min(counts[t], round(total * shares[t]))) for t in counts}


def _thin(requests: list[Request], keep: int, *, seed: int, stream: int) -> list[Request]:
    if keep >= len(requests):
        return list(requests)
    rng = np.random.default_rng((seed, stream))
    chosen = np.sort(rng.choice(len(requests), size=keep, replace=False))
    return [requests[int(i)] for i in chosen]
