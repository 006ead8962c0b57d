"""Base-model placement: which base model each swappable replica holds, from each model's demand.

A *swap group* is the healthy replicas of one accelerator kind and TP that may each hold any of
the same base models (``ReplicaSpec.models``). A model ``m``'s demand is counted in replicas:
``u_m = Σ_c λ_{m,c} / μ_{m,c}``, ``λ`` the window's rate of its class-``c`` requests and ``μ``
the capacity at that class's SLO of one replica of the group holding ``m`` (the capacity
source's table, at the class's mean prompt and output). With ``n_m`` of the group's replicas on
``m`` and ``f_m`` replicas of the same kind that always serve it, ``m``'s utilisation is
``ρ_m = u_m / (n_m + f_m)``; the plan minimises the largest ``ρ_m`` (the pool that misses first).

**By slots** (``slots=True``, utilisation only): a LoRA adapter holds one of a replica's
``max_loras`` slots while any request of it is in the engine, so a model whose traffic spreads
over many adapters needs replicas for their slots as well as for their work. Its demand is then
``max(u_m, Σ_a b_a / S)``, ``b_a`` adapter ``a``'s activity over the window (the share of
:data:`~placement.solver.adapters.ACTIVITY_BIN_S`-second sub-windows with an arrival, as the
adapter placement reads it) and ``S`` the group's slots per replica; a model with no adapters
(or a group with no slots) keeps ``u_m``.

Starting from what each replica holds now (so a re-plan moves nothing it need not), it moves one
replica at a time from the model that can best spare one to the most loaded model, while the
move lowers the largest utilisation by more than :data:`HYSTERESIS`, counting the swap's cost:
a replica that swaps serves nothing for ``load_s`` seconds, ``load_s / horizon_s`` of a replica
over the plan's horizon, charged to the model it joins. A model with demand keeps at least one
replica it already had; at most :data:`MAX_SWAPS` replicas move per plan.

**By credit** (``credits`` given): balancing utilisation moves replicas by each model's work
whatever its tenants' credits, and reads that work from a capacity that may depend on which
split produced it. Instead each model is entitled to the replicas its tenants are owed by their
credits, charged by what their requests cost (``price``; max-min fair in that charge,
:mod:`placement.solver.model_entitlement`): a model short of its entitlement by at least
:data:`SHORT` replicas gains one first (from the model with the most to spare); then spare
replicas (a model's beyond its entitlement) go where one more adds the most requests served at
SLO — ``λ_m / u_m`` req/s per replica up to ``u_m``, fluid — net of what the donor loses, by at
least :data:`HYSTERESIS` of a replica's requests; a donor never falls short of its own
entitlement by :data:`SHORT` (so the next plan on the same demand moves nothing back) and a
model with demand keeps a replica. Demand here may be read from several capacity sources, the
lowest capacity of a class winning (``guard``): capacity learned on a model's light telemetry
reads it ample and would hand its replicas away.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass

from models.capacity import Slo
from placement.domain.base_models import swap_load_s
from placement.domain.fleet import Fleet, ReplicaSpec, with_model
from placement.domain.llm import get_model
from placement.domain.requests import Request, RequestClass, Tenant
from placement.errors import InputError
from placement.solver.adapters import adapter_activity
from placement.solver.capacity import CapacitySource
from placement.solver.model_entitlement import model_entitlements, tenant_demand

#: A move must lower the largest utilisation by this share of it (no thrash on noise).
HYSTERESIS = 0.1
#: Replicas that start a swap in one plan, at most (a drain takes capacity from the pool).
MAX_SWAPS = 2
#: By credit: a model this many replicas short of its entitlement gains one (half a replica and
#: the hysteresis: rounding, without moving back on the next plan's noise).
SHORT = 0.5 + HYSTERESIS


@dataclass(frozen=True, slots=True, kw_only=True)
class BaseModelPlacement:
    """Each replica's base model under the plan (every replica of the fleet), the demand in
    replicas ``u_m`` of each swappable model, and the replicas that must swap."""

    models: dict[str, str]
    demand: dict[str, float]
    swaps: tuple[str, ...]


def swappable(fleet: Fleet) -> bool:
    """Whether any replica of ``fleet`` may change its base model."""
    return any(r.models for r in fleet.replicas)


def place_base_models(
    requests: Sequence[Request],
    fleet: Fleet,
    classes: Mapping[str, RequestClass],
    capacity: CapacitySource,
    *,
    window_s: float,
    horizon_s: float,
    unhealthy: Collection[str] = (),
    credits: Mapping[str, Tenant] | None = None,
    guard: CapacitySource | None = None,
    price: Callable[[Request], float] | None = None,
    slots: bool = False,
) -> BaseModelPlacement:
    """The base model of every replica for the demand of ``requests`` over ``window_s``, the
    swaps' cost spread over ``horizon_s`` (the time until the next plan); with ``credits`` (the
    tenants), by their entitlements and goodput at SLO rather than by utilisation, demand read
    from ``capacity`` and ``guard`` (the lower capacity of the two) and charged by ``price``
    (what one request costs; None: the replica-time it takes); ``slots``: without credits, a
    model's demand is at least the replicas its adapters' activity fills the LoRA slots of."""
    if window_s <= 0 or horizon_s <= 0:
        raise InputError(
            f"window_s={window_s}, horizon_s={horizon_s}", field="window_s", expected="> 0"
        )
    held = {r.id: r.model.name for r in fleet.replicas}
    demand: dict[str, float] = {}
    swaps: list[str] = []
    for group in _groups(fleet, unhealthy):
        head = group[0]
        fixed = {
            m: sum(
                1
                for r in fleet.replicas
                if not r.models
                and r.id not in unhealthy
                and r.model.name == m
                and (r.accelerator.kind, r.tp) == (head.accelerator.kind, head.tp)
            )
            for m in head.models
        }
        cost = {
            m: swap_load_s(get_model(m), gbps=head.weights_load_gbps, startup_s=head.startup_s)
            / horizon_s
            for m in head.models
        }
        if credits is None:
            u = {m: _demand(requests, m, head, classes, capacity, window_s) for m in head.models}
            if slots and head.max_loras > 0:
                u = {
                    m: max(v, slot_demand(requests, m, head.max_loras, window_s))
                    for m, v in u.items()
                }
            moved = _rebalance(group, u, fixed, cost)
        else:
            sources = (capacity,) if guard is None else (capacity, guard)
            asks = tenant_demand(requests, head.models, head, classes, sources, window_s, price)
            u = dict.fromkeys(head.models, 0.0)
            rate = dict.fromkeys(head.models, 0.0)
            for d in asks:
                u[d.model] += d.replicas
                rate[d.model] += d.rate
            owed = model_entitlements(asks, credits, float(len(group) + sum(fixed.values())))
            floor = {m: owed.get(m, 0.0) for m in head.models}
            moved = _rebalance_by_credit(group, u, rate, floor, fixed, cost)
        for replica, model in moved:
            held[replica] = model
            swaps.append(replica)
        demand.update(u)
    return BaseModelPlacement(models=held, demand=demand, swaps=tuple(swaps))


def with_residency(fleet: Fleet, models: Mapping[str, str]) -> Fleet:
    """``fleet`` with each replica holding ``models[id]`` (its own model when absent)."""
    out: list[ReplicaSpec] = []
    for r in fleet.replicas:
        name = models.get(r.id, r.model.name)
        out.append(r if name == r.model.name else with_model(r, get_model(name)))
    return Fleet(name=fleet.name, replicas=tuple(out))


def _groups(fleet: Fleet, unhealthy: Collection[str]) -> list[list[ReplicaSpec]]:
    groups: dict[tuple[str, int, tuple[str, ...]], list[ReplicaSpec]] = {}
    for r in fleet.replicas:
        if r.models and r.id not in unhealthy:
            key = (r.accelerator.kind, r.tp, tuple(sorted(r.models)))
            groups.setdefault(key, []).append(r)
    return [groups[k] for k in sorted(groups)]


def _demand(
    requests: Sequence[Request],
    model: str,
    replica: ReplicaSpec,
    classes: Mapping[str, RequestClass],
    capacity: CapacitySource,
    window_s: float,
) -> float:
    """Replicas of ``replica``'s kind holding ``model`` that its window's demand keeps busy."""
    by_class: dict[str, list[Request]] = {}
    for r in requests:
        if r.model == model:
            by_class.setdefault(r.request_class, []).append(r)
    if not by_class:
        return 0.0
    table = capacity.table(replica.accelerator.kind, model, replica.tp)
    total = 0.0
    for name, reqs in sorted(by_class.items()):
        cls = classes.get(name)
        if cls is None:
            raise InputError(f"request class {name!r} is not defined", field="request_class")
        mean_in = sum(r.input_tokens for r in reqs) / len(reqs)
        mean_out = sum(r.output_tokens for r in reqs) / len(reqs)
        mu = table.lookup(mean_in, mean_out, table.slo_index(Slo(cls.ttft_slo_s, cls.tpot_slo_s)))
        if mu <= 0:  # unreachable at its SLO even alone: at the loosest level the table has
            mu = table.lookup(mean_in, mean_out, 0)
        total += len(reqs) / window_s / mu if mu > 0 else 0.0
    return total


def slot_demand(requests: Sequence[Request], model: str, max_loras: int, window_s: float) -> float:
    """Replicas with ``max_loras`` LoRA slots each that the activity of ``model``'s adapters
    over the window fills: ``Σ_a b_a / max_loras`` (0 with no adapter requests)."""
    if max_loras <= 0:
        raise InputError(f"max_loras={max_loras}", field="max_loras", expected="> 0")
    arrivals: dict[str, list[float]] = {}
    for r in requests:
        if r.model == model and r.adapter:
            arrivals.setdefault(r.adapter, []).append(r.arrival_s)
    if not arrivals:
        return 0.0
    start = min(r.arrival_s for r in requests)
    busy = sum(adapter_activity(a, start_s=start, window_s=window_s) for a in arrivals.values())
    return busy / max_loras


def _rebalance(
    group: list[ReplicaSpec],
    demand: Mapping[str, float],
    fixed: Mapping[str, int],
    cost: Mapping[str, float],
) -> list[tuple[str, str]]:
    """(replica id, new model) moves, at most :data:`MAX_SWAPS`, from the current holders."""
    holders: dict[str, list[str]] = {m: [] for m in demand}
    for r in group:
        holders[r.model.name].append(r.id)
    count = {m: float(len(ids) + fixed[m]) for m, ids in holders.items()}

    def util(m: str, c: float) -> float:
        if demand[m] <= 0:
            return 0.0
        return demand[m] / c if c > 0 else float("inf")

    moves: list[tuple[str, str]] = []
    while len(moves) < MAX_SWAPS:
        worst = max(sorted(demand), key=lambda m: util(m, count[m]))
        top = util(worst, count[worst])
        best: tuple[float, str] | None = None
        for m in sorted(demand):
            if m == worst or not holders[m]:
                continue
            if demand[m] > 0 and count[m] - 1 < 1:  # keeps one replica while it has demand
                continue
            after = {k: util(k, count[k]) for k in demand}
            after[m] = util(m, count[m] - 1)
            after[worst] = util(worst, count[worst] + 1 - cost[worst])
            peak = max(after.values())
            if best is None or peak < best[0]:
                best = (peak, m)
        if best is None or not best[0] < top * (1 - HYSTERESIS):
            break
        moves.append(_swap(holders, count, cost, best[1], worst))
    return moves


def _swap(
    holders: dict[str, list[str]],
    count: dict[str, float],
    cost: Mapping[str, float],
    donor: str,
    receiver: str,
) -> tuple[str, str]:
    """Move the donor's last replica (deterministic) to ``receiver``, which counts it less its
    loading ``cost``: the (replica id, new model) move."""
    replica = holders[donor].pop()
    holders[receiver].append(replica)
    count[donor] -= 1
    count[receiver] += 1 - cost[receiver]
    return replica, receiver


def _rebalance_by_credit(
    group: list[ReplicaSpec],
    demand: Mapping[str, float],
    rate: Mapping[str, float],
    floor: Mapping[str, float],
    fixed: Mapping[str, int],
    cost: Mapping[str, float],
) -> list[tuple[str, str]]:
    """(replica id, new model) moves, at most :data:`MAX_SWAPS`: first to models short of
    their entitlement ``floor``, then to where a replica serves the most more at SLO."""
    holders: dict[str, list[str]] = {m: [] for m in demand}
    for r in group:
        holders[r.model.name].append(r.id)
    count = {m: float(len(ids) + fixed[m]) for m, ids in holders.items()}

    def served(m: str, c: float) -> float:
        """Requests/s served at SLO by ``c`` replicas on ``m`` (fluid)."""
        u = demand[m]
        return rate[m] / u * min(u, max(c, 0.0)) if u > 0 else 0.0

    def per_replica(m: str) -> float:
        return rate[m] / demand[m] if demand[m] > 0 else 0.0

    def short(m: str) -> bool:
        return floor[m] - count[m] >= SHORT or (demand[m] > 0 and count[m] < 1)

    def can_give(m: str) -> bool:
        if not holders[m] or (demand[m] > 0 and count[m] - 1 < 1):
            return False
        return floor[m] - (count[m] - 1) < SHORT

    moves: list[tuple[str, str]] = []
    while len(moves) < MAX_SWAPS:
        donors = [m for m in sorted(demand) if can_give(m)]
        pick: tuple[str, str] | None = None
        for m in sorted(demand, key=lambda k: (-(floor[k] - count[k]), k)):
            spare = [d for d in donors if d != m]
            if short(m) and spare:
                pick = (max(spare, key=lambda d: (count[d] - floor[d], d)), m)
                break
        if pick is None:
            best: tuple[float, str, str] | None = None
            for m in sorted(demand):
                gain = served(m, count[m] + 1 - cost[m]) - served(m, count[m])
                for d in donors:
                    if d == m:
                        continue
                    net = gain - (served(d, count[d]) - served(d, count[d] - 1))
                    if net > HYSTERESIS * per_replica(m) and (best is None or net > best[0]):
                        best = (net, d, m)
            if best is not None:
                pick = (best[1], best[2])
        if pick is None:
            break
        moves.append(_swap(holders, count, cost, *pick))
    return moves
