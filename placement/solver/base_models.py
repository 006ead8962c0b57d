"""Base-model placement: which base model each swappable replica holds, from each model's demand.

A *swap group* is the healthy replicas of one accelerator kind and TP that may each hold any of
the same base models (``ReplicaSpec.models``). A model ``m``'s demand is counted in replicas:
``u_m = Σ_c λ_{m,c} / μ_{m,c}``, ``λ`` the window's rate of its class-``c`` requests and ``μ``
the capacity at that class's SLO of one replica of the group holding ``m`` (the capacity
source's table, at the class's mean prompt and output). With ``n_m`` of the group's replicas on
``m`` and ``f_m`` replicas of the same kind that always serve it, ``m``'s utilisation is
``ρ_m = u_m / (n_m + f_m)``; the plan minimises the largest ``ρ_m`` (the pool that misses first).

Starting from what each replica holds now (so a re-plan moves nothing it need not), it moves one
replica at a time from the model that can best spare one to the most loaded model, while the
move lowers the largest utilisation by more than :data:`HYSTERESIS`, counting the swap's cost:
a replica that swaps serves nothing for ``load_s`` seconds, ``load_s / horizon_s`` of a replica
over the plan's horizon, charged to the model it joins. A model with demand keeps at least one
replica it already had; at most :data:`MAX_SWAPS` replicas move per plan.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from models.capacity import Slo
from placement.domain.base_models import swap_load_s
from placement.domain.fleet import Fleet, ReplicaSpec, with_model
from placement.domain.llm import get_model
from placement.domain.requests import Request, RequestClass
from placement.errors import InputError
from placement.solver.capacity import CapacitySource

#: A move must lower the largest utilisation by this share of it (no thrash on noise).
HYSTERESIS = 0.1
#: Replicas that start a swap in one plan, at most (a drain takes capacity from the pool).
MAX_SWAPS = 2


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
) -> BaseModelPlacement:
    """The base model of every replica for the demand of ``requests`` over ``window_s``, the
    swaps' cost spread over ``horizon_s`` (the time until the next plan)."""
    if window_s <= 0 or horizon_s <= 0:
        raise InputError(
            f"window_s={window_s}, horizon_s={horizon_s}", field="window_s", expected="> 0"
        )
    held = {r.id: r.model.name for r in fleet.replicas}
    demand: dict[str, float] = {}
    swaps: list[str] = []
    for group in _groups(fleet, unhealthy):
        head = group[0]
        u = {m: _demand(requests, m, head, classes, capacity, window_s) for m in head.models}
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
        moved = _rebalance(group, u, fixed, cost)
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
        donor = best[1]
        replica = holders[donor].pop()  # the last one (deterministic)
        holders[worst].append(replica)
        count[donor] -= 1
        count[worst] += 1 - cost[worst]
        moves.append((replica, worst))
    return moves
