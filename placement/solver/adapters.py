"""LoRA adapter residency: which replicas of a base model's pool keep which adapters, and
where each tenant's adapter traffic goes.

Units ``u`` are (tenant, base model, adapter) with their rate ``λ_u`` over the window (adapter
``""``: the base model itself, which needs no slot); replicas ``r`` are the healthy replicas
serving the unit's base model with ``S_r`` LoRA slots (``max_loras``).

A slot is taken not by an adapter's rate but by its *activity*: vLLM evicts only an adapter no
running request uses, so an adapter with a request in flight most of the time holds its slot
all of that time, and a replica asked for more active adapters than it has slots makes their
requests wait (and stalls the engine at every load). The forecast is therefore each adapter's
activity ``b_u``: the share of the window's :data:`ACTIVITY_BIN_S`-second sub-windows in
which it had an arrival (a bursty adapter, idle between bursts, counts less than a steady one
of the same mean rate). When the pool's slots cannot hold every adapter's activity, the plan
splits the pool in two:

* **pinned** — adapters taken by utilisation (``λ_u / μ_u``, ``μ`` the replica's capacity at
  the unit's class SLO), heaviest first, each onto the main replica with the least utilisation
  whose pinned activity stays within its slots (the previous plan's holder first, so a re-solve
  loads nothing it need not); an adapter heavier than a replica's fair share gets one copy per
  share. Adapters whose activities fit a replica's slots between them rarely meet there, so
  their requests seldom wait for a slot and load little;
* **swap** — the rest, routed over the last ``K`` replicas of the pool (the swap replicas),
  which pin nothing: their slots take turns, so the loads and waits of cold and bursty adapters
  stall these replicas only. ``K`` is the least number that keeps the swapped activity within
  :data:`SWAP_OVERSUBSCRIPTION` × their slots.

Base-model traffic needs no slot: it is routed to the replicas by their utilisation headroom
(the route path balances it live). Nothing is shed here (the admission gate sheds).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from models.capacity import Slo
from placement.domain.fleet import Fleet, ReplicaSpec
from placement.domain.requests import Request, RequestClass
from placement.plan.schema import AdapterRoute, DefaultRoute, Plan, Route
from placement.solver.capacity import CapacitySource

#: Sub-window of the activity forecast, seconds (about an 8B request's time in the engine).
ACTIVITY_BIN_S = 1.0
#: Swapped activity per swap slot the plan accepts before it adds a swap replica.
SWAP_OVERSUBSCRIPTION = 3.0
#: A base-model route's weight on a replica with no utilisation headroom left.
MIN_BASE_WEIGHT = 0.05
PLANNED = "planned"


@dataclass(frozen=True, slots=True)
class _Unit:
    tenant: str
    model: str
    adapter: str
    rate: float
    activity: float
    mean_input: float
    mean_output: float
    slo: Slo


@dataclass(frozen=True, slots=True, kw_only=True)
class Residency:
    """The plan's answer: ``share[(tenant, model, adapter)][replica id]``, the adapters pinned
    per replica id (a swap replica pins none), and the swap replicas."""

    share: dict[tuple[str, str, str], dict[str, float]]
    adapters: dict[str, tuple[str, ...]]
    rate: dict[tuple[str, str, str], float]
    status: str
    swap: tuple[str, ...] = ()


def adapter_activity(
    arrivals: Sequence[float], *, start_s: float, window_s: float, bin_s: float = ACTIVITY_BIN_S
) -> float:
    """Share of the ``bin_s``-second sub-windows of [start, start + window) with an arrival."""
    bins = max(math.ceil(window_s / bin_s), 1)
    hit = {min(int((t - start_s) / bin_s), bins - 1) for t in arrivals if t >= start_s}
    return len(hit) / bins


def _units(
    requests: Sequence[Request], classes: Mapping[str, RequestClass], window_s: float
) -> list[_Unit]:
    groups: dict[tuple[str, str, str], list[Request]] = {}
    for r in requests:
        groups.setdefault((r.tenant, r.model, r.adapter), []).append(r)
    start = min((r.arrival_s for r in requests), default=0.0)
    units: list[_Unit] = []
    for (tenant, model, adapter), reqs in sorted(groups.items()):
        # a unit's SLO is its strictest class's
        strict = min((classes[r.request_class] for r in reqs), key=lambda c: c.ttft_slo_s)
        units.append(
            _Unit(
                tenant,
                model,
                adapter,
                len(reqs) / window_s,
                adapter_activity(
                    [r.arrival_s for r in reqs],
                    start_s=start,
                    window_s=window_s,
                    bin_s=ACTIVITY_BIN_S,
                )
                if adapter
                else 0.0,
                float(np.mean([r.input_tokens for r in reqs])),
                float(np.mean([r.output_tokens for r in reqs])),
                Slo(strict.ttft_slo_s, strict.tpot_slo_s),
            )
        )
    return units


def place_adapters(
    requests: Sequence[Request],
    fleet: Fleet,
    classes: Mapping[str, RequestClass],
    capacity: CapacitySource,
    *,
    window_s: float,
    unhealthy: Collection[str] = (),
    previous: Mapping[str, Collection[str]] | None = None,
) -> Residency:
    """Adapter residency and routes for the traffic of pools whose replicas have LoRA slots.

    Only base models some replica serves with ``max_loras > 0`` take part; ``previous`` maps a
    replica id to the adapters it held under the last plan (kept where they still fit)."""
    lora_models = sorted({r.model.name for r in fleet.replicas if r.max_loras > 0})
    window = max(window_s, 1e-9)
    share: dict[tuple[str, str, str], dict[str, float]] = {}
    adapters: dict[str, tuple[str, ...]] = {}
    rate: dict[tuple[str, str, str], float] = {}
    swap: list[str] = []
    for model in lora_models:
        units = _units([r for r in requests if r.model == model], classes, window)
        pool = [r for r in fleet.replicas if r.model.name == model and r.id not in unhealthy]
        if not units or not pool:
            continue
        placed = _place_pool(units, pool, capacity, previous or {})
        share.update(placed.share)
        adapters.update(placed.adapters)
        rate.update(placed.rate)
        swap += placed.swap
    status = PLANNED if share else "empty"
    return Residency(share=share, adapters=adapters, rate=rate, status=status, swap=tuple(swap))


def _capacity(unit: _Unit, replica: ReplicaSpec, capacity: CapacitySource) -> float:
    table = capacity.table(replica.accelerator.kind, replica.model.name, replica.tp)
    return float(table.lookup(unit.mean_input, unit.mean_output, table.slo_index(unit.slo)))


def _utilisation(
    units: list[_Unit], pool: list[ReplicaSpec], capacity: CapacitySource
) -> list[float]:
    """Each unit's utilisation of one replica (``λ / μ``, μ averaged over the pool); a unit no
    replica serves at its SLO counts at the pool's least capacity seen."""
    mu = [float(np.mean([_capacity(u, r, capacity) for r in pool])) for u in units]
    floor = min((m for m in mu if m > 0), default=1.0)
    return [u.rate / (m if m > 0 else floor) for u, m in zip(units, mu, strict=True)]


def _place_pool(
    units: list[_Unit],
    pool: list[ReplicaSpec],
    capacity: CapacitySource,
    previous: Mapping[str, Collection[str]],
) -> Residency:
    util = _utilisation(units, pool, capacity)
    fair = sum(util) / len(pool)
    lora = [i for i, u in enumerate(units) if u.adapter]
    order = sorted(lora, key=lambda i: (-util[i], units[i].adapter, units[i].tenant))
    for k in range(len(pool)):
        main, spare = pool[: len(pool) - k], pool[len(pool) - k :]
        pinned, load, left = _pin(units, util, order, main, fair, previous)
        swapped = sum(units[i].activity for i in left)
        slots = sum(r.max_loras for r in spare)
        if not left or (slots and swapped <= SWAP_OVERSUBSCRIPTION * slots):
            break
    share: dict[tuple[str, str, str], dict[str, float]] = {}
    held: dict[str, list[str]] = {r.id: [] for r in pool}
    for i, where in pinned.items():
        u = units[i]
        share[(u.tenant, u.model, u.adapter)] = {rid: 1.0 / len(where) for rid in where}
        for rid in where:
            held[rid].append(u.adapter)
    # the swapped adapters over the swap replicas (with none left, over the whole pool)
    targets = spare or main
    for i in left:
        u = units[i]
        share[(u.tenant, u.model, u.adapter)] = {r.id: 1.0 / len(targets) for r in targets}
        for r in targets:
            # not kept there: it takes turns in the slots, and the route path follows where
            # it is live (in flight, or just sent), so each stays on one swap replica a while
            load[r.id] = load.get(r.id, 0.0) + util[i] / len(targets)
    headroom = {r.id: max(fair - load.get(r.id, 0.0), MIN_BASE_WEIGHT * fair) for r in pool}
    total = sum(headroom.values())
    for u in units:
        if not u.adapter:
            share[(u.tenant, u.model, u.adapter)] = {rid: h / total for rid, h in headroom.items()}
    return Residency(
        share=share,
        adapters={rid: tuple(sorted(set(a))) for rid, a in held.items()},
        rate={(u.tenant, u.model, u.adapter): u.rate for u in units},
        status=PLANNED,
        swap=tuple(r.id for r in spare),
    )


def _pin(
    units: list[_Unit],
    util: list[float],
    order: list[int],
    main: list[ReplicaSpec],
    fair: float,
    previous: Mapping[str, Collection[str]],
) -> tuple[dict[int, list[str]], dict[str, float], list[int]]:
    """Adapters pinned onto ``main`` within each replica's slots by activity: unit → replica
    ids; each replica's utilisation; the units left to swap."""
    active = {r.id: 0.0 for r in main}
    load = {r.id: 0.0 for r in main}
    slots = {r.id: r.max_loras for r in main}
    pinned: dict[int, list[str]] = {}
    left: list[int] = []
    for i in order:
        u = units[i]
        copies = min(max(1, math.ceil(util[i] / fair - 1e-9)), len(main)) if fair > 0 else 1
        where: list[str] = []
        for _ in range(copies):
            fits = [
                rid
                for rid in active
                if rid not in where and active[rid] + u.activity <= slots[rid] + 1e-9
            ]
            if not fits:
                break
            rid = min(fits, key=lambda r: (u.adapter not in previous.get(r, ()), load[r], r))
            where.append(rid)
        if not where:
            left.append(i)
            continue
        pinned[i] = where
        for rid in where:
            active[rid] += u.activity
            load[rid] += util[i] / len(where)
    return pinned, load, left


def with_residency(plan: Plan, residency: Residency) -> Plan:
    """``plan`` with the residency's adapter routes, its replicas' adapters, and its routes
    for base-model traffic of the LoRA pools in place of the plan's defaults."""
    if not residency.share:
        return plan

    def route(shares: Mapping[str, float]) -> Route:
        total = sum(shares.values())
        ids = tuple(sorted(shares))
        weights = [shares[i] / total for i in ids]
        weights[-1] = 1.0 - sum(weights[:-1])
        return Route(replicas=ids, weights=tuple(weights))

    adapter_routes = tuple(
        AdapterRoute(
            tenant=tenant,
            model=model,
            adapter=adapter,
            rate_rps=residency.rate[(tenant, model, adapter)],
            route=route(s),
        )
        for (tenant, model, adapter), s in sorted(residency.share.items())
        if adapter
    )
    base = {
        (tenant, model): route(s)
        for (tenant, model, adapter), s in residency.share.items()
        if not adapter
    }
    defaults = tuple(
        DefaultRoute(tenant=d.tenant, model=d.model, route=base.get((d.tenant, d.model), d.route))
        for d in plan.defaults
    )
    replicas = tuple(
        r.model_copy(update={"adapters": residency.adapters.get(r.id, ())}) for r in plan.replicas
    )
    return plan.model_copy(
        update={"adapter_routes": adapter_routes, "defaults": defaults, "replicas": replicas}
    )
