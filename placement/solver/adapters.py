"""LoRA adapter residency: which replicas of a base model's pool hold which adapters, and where
each tenant's adapter traffic goes — a small mixed-integer program per solve.

Units ``u`` are (tenant, base model, adapter) with their rate ``λ_u`` over the window
(adapter ``""``: the base model itself, which needs no slot); replicas ``r`` are the healthy
replicas serving the unit's base model with ``S_r`` LoRA slots (``max_loras``).

* ``x[u, r] ∈ [0, 1]`` — share of ``u``'s traffic sent to ``r``;
* ``a[u, r] ∈ {0, 1}`` — adapter units only: ``u``'s adapter is kept resident on ``r``;
* ``z_m ∈ [0, UTILISATION_CAP]`` — the busiest replica's utilisation in pool ``m``.

Constraints: ``Σ_r x ≤ 1``; ``x ≤ a`` (traffic only where the adapter is resident);
``Σ_u a[u, r] ≤ S_r`` (slots); ``Σ_u λ_u x[u, r] / μ[u, r] ≤ z_m`` (utilisation at SLO, ``μ``
the replica's capacity at the unit's class SLO for the unit's mean prompt and output).
Objective (maximised, per unit of total demand): served traffic weighted by class priority,
minus :data:`BALANCE_WEIGHT` × ``Σ_m z_m`` (spread the load: a hot adapter gets several
replicas), minus :data:`LOAD_WEIGHT` per residency the previous plan did not have (a load
stalls the replica) and :data:`RESIDENCY_WEIGHT` per residency (no idle slots claimed).
Solved with HiGHS through MathOpt; any status without a solution falls back to a greedy
residency (units by rate, each on the replicas with the most spare capacity and a free slot).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from models.capacity import Slo
from placement.domain.fleet import Fleet, ReplicaSpec
from placement.domain.requests import Request, RequestClass
from placement.plan.schema import AdapterRoute, DefaultRoute, Plan, Route
from placement.solver.capacity import CapacitySource
from placement.solver.lp import LinearProgram, RowBuilder, solve

UTILISATION_CAP = 1.0
BALANCE_WEIGHT = 0.05
LOAD_WEIGHT = 0.01
RESIDENCY_WEIGHT = 1e-4
MIN_SHARE = 1e-3
TIME_LIMIT_S = 2.0


@dataclass(frozen=True, slots=True)
class _Unit:
    tenant: str
    model: str
    adapter: str
    rate: float
    weight: float
    mean_input: float
    mean_output: float
    slo: Slo


@dataclass(frozen=True, slots=True, kw_only=True)
class Residency:
    """The program's answer: ``share[(tenant, model, adapter)][replica id]`` and the adapters
    resident per replica id."""

    share: dict[tuple[str, str, str], dict[str, float]]
    adapters: dict[str, tuple[str, ...]]
    rate: dict[tuple[str, str, str], float]
    status: str


def _units(
    requests: Sequence[Request], classes: Mapping[str, RequestClass], window_s: float
) -> list[_Unit]:
    groups: dict[tuple[str, str, str, str], list[Request]] = {}
    for r in requests:
        groups.setdefault((r.tenant, r.model, r.adapter, r.request_class), []).append(r)
    merged: dict[tuple[str, str, str], list[tuple[str, list[Request]]]] = {}
    for (tenant, model, adapter, cls), reqs in groups.items():
        merged.setdefault((tenant, model, adapter), []).append((cls, reqs))
    units: list[_Unit] = []
    for (tenant, model, adapter), parts in sorted(merged.items()):
        # a unit's SLO is its strictest class's, its weight its traffic's mean priority weight
        reqs = [r for _, rs in parts for r in rs]
        strict = min((classes[c] for c, _ in parts), key=lambda c: c.ttft_slo_s)
        weight = sum(2.0 ** -classes[c].priority * len(rs) for c, rs in parts) / len(reqs)
        units.append(
            _Unit(
                tenant,
                model,
                adapter,
                len(reqs) / window_s,
                weight,
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
    time_limit_s: float = TIME_LIMIT_S,
) -> Residency:
    """Adapter residency and routes for the traffic of pools whose replicas have LoRA slots.

    Only base models some replica serves with ``max_loras > 0`` take part; ``previous`` maps a
    replica id to the adapters it held under the last plan (their residency costs no load)."""
    lora_models = {r.model.name for r in fleet.replicas if r.max_loras > 0}
    window = max(window_s, 1e-9)
    units = _units([r for r in requests if r.model in lora_models], classes, window)
    replicas = [r for r in fleet.replicas if r.model.name in lora_models and r.id not in unhealthy]
    if not units or not replicas:
        return Residency(share={}, adapters={}, rate={}, status="empty")
    pairs = [(u, k) for u, unit in enumerate(units) for k, r in enumerate(replicas)]
    pairs = [(u, k) for u, k in pairs if replicas[k].model.name == units[u].model]
    mu = np.array([_capacity(units[u], replicas[k], capacity) for u, k in pairs])
    keep = mu > 0
    pairs = [p for p, ok in zip(pairs, keep, strict=True) if ok]
    mu = mu[keep]
    models = sorted({units[u].model for u, _ in pairs})
    prev = previous or {}
    lp = _program(units, replicas, pairs, mu, models, prev)
    result = solve(lp, backend="mathopt-highs", time_limit_s=time_limit_s)
    n = len(pairs)
    status: str = result.status
    if result.x.size:
        x = result.x[:n]
        resident = _resident_from(result.x, units, pairs)
    else:
        x, resident = _greedy(units, replicas, pairs, mu)
        status = f"greedy ({result.status})"
    return _residency(units, replicas, pairs, x, resident, status)


def _capacity(unit: _Unit, replica: ReplicaSpec, capacity: CapacitySource) -> float:
    table = capacity.table(replica.accelerator.kind, replica.model.name, replica.tp)
    return float(table.lookup(unit.mean_input, unit.mean_output, table.slo_index(unit.slo)))


def _program(
    units: list[_Unit],
    replicas: list[ReplicaSpec],
    pairs: list[tuple[int, int]],
    mu: np.ndarray,
    models: list[str],
    previous: Mapping[str, Collection[str]],
) -> LinearProgram:
    specs = replicas
    n = len(pairs)
    pu = np.array([u for u, _ in pairs], dtype=np.int64)
    pk = np.array([k for _, k in pairs], dtype=np.int64)
    adapter_pair = np.flatnonzero([units[u].adapter != "" for u in pu])
    n_a = len(adapter_pair)
    a0 = n  # a columns
    z0 = n + n_a  # z columns, one per model
    n_vars = z0 + len(models)
    total = sum(u.rate for u in units)
    rate = np.array([units[u].rate for u in pu])
    obj = np.zeros(n_vars)
    obj[:n] = rate * np.array([units[u].weight for u in pu]) / total
    fresh = np.array(
        [units[pu[p]].adapter not in previous.get(specs[pk[p]].id, ()) for p in adapter_pair],
        dtype=bool,
    )
    obj[a0:z0] = -RESIDENCY_WEIGHT - LOAD_WEIGHT * fresh
    obj[z0:] = -BALANCE_WEIGHT
    lb = np.zeros(n_vars)
    ub = np.ones(n_vars)
    ub[z0:] = UTILISATION_CAP
    integer = np.zeros(n_vars, dtype=bool)
    integer[a0:z0] = True
    rows = RowBuilder()
    # Σ_r x ≤ 1 per unit
    rows.add(pu, np.arange(n), np.ones(n), np.full(len(units), -np.inf), np.ones(len(units)))
    # x − a ≤ 0 per adapter pair
    local = np.arange(n_a)
    rows.add(
        np.concatenate([local, local]),
        np.concatenate([adapter_pair, a0 + local]),
        np.concatenate([np.ones(n_a), -np.ones(n_a)]),
        np.full(n_a, -np.inf),
        np.zeros(n_a),
    )
    # Σ a ≤ slots per replica
    slots = np.array([s.max_loras for s in specs], dtype=np.float64)
    rows.add(pk[adapter_pair], a0 + local, np.ones(n_a), np.full(len(specs), -np.inf), slots)
    # Σ λ x / μ − z_m ≤ 0 per replica
    model_of = {m: i for i, m in enumerate(models)}
    replica_model = np.array([model_of.get(s.model.name, 0) for s in specs])
    k_all = np.arange(len(specs))
    rows.add(
        np.concatenate([pk, k_all]),
        np.concatenate([np.arange(n), z0 + replica_model]),
        np.concatenate([rate / mu, -np.ones(len(specs))]),
        np.full(len(specs), -np.inf),
        np.zeros(len(specs)),
    )
    row_lb, row_ub, r_idx, c_idx, vals = rows.arrays()
    return LinearProgram(
        lb=lb,
        ub=ub,
        obj=obj,
        integer=integer,
        row_lb=row_lb,
        row_ub=row_ub,
        rows=r_idx,
        cols=c_idx,
        vals=vals,
    )


def _resident_from(
    sol: np.ndarray, units: list[_Unit], pairs: list[tuple[int, int]]
) -> set[tuple[int, int]]:
    n = len(pairs)
    adapter_pair = [p for p, (u, _) in enumerate(pairs) if units[u].adapter]
    return {pairs[p] for j, p in enumerate(adapter_pair) if sol[n + j] > 0.5}


def _greedy(
    units: list[_Unit], replicas: list[ReplicaSpec], pairs: list[tuple[int, int]], mu: np.ndarray
) -> tuple[np.ndarray, set[tuple[int, int]]]:
    """Units by rate, each whole on the replica with the least utilisation and a free slot."""
    specs = replicas
    util = np.zeros(len(specs))
    free = np.array([s.max_loras for s in specs])
    x = np.zeros(len(pairs))
    resident: set[tuple[int, int]] = set()
    by_unit: dict[int, list[int]] = {}
    for p, (u, _) in enumerate(pairs):
        by_unit.setdefault(u, []).append(p)
    for u in sorted(by_unit, key=lambda u: -units[u].rate):
        options = [p for p in by_unit[u] if not units[u].adapter or free[pairs[p][1]] > 0]
        if not options:
            continue
        p = min(options, key=lambda p: util[pairs[p][1]])
        k = pairs[p][1]
        x[p] = 1.0
        util[k] += units[u].rate / mu[p]
        if units[u].adapter:
            free[k] -= 1
            resident.add(pairs[p])
    return x, resident


def _residency(
    units: list[_Unit],
    replicas: list[ReplicaSpec],
    pairs: list[tuple[int, int]],
    x: np.ndarray,
    resident: set[tuple[int, int]],
    status: str,
) -> Residency:
    specs = replicas
    share: dict[tuple[str, str, str], dict[str, float]] = {}
    for p, (u, k) in enumerate(pairs):
        unit = units[u]
        if x[p] >= MIN_SHARE and (not unit.adapter or (u, k) in resident):
            share.setdefault((unit.tenant, unit.model, unit.adapter), {})[specs[k].id] = float(x[p])
    adapters: dict[str, list[str]] = {s.id: [] for s in specs}
    for u, k in sorted(resident):
        adapters[specs[k].id].append(units[u].adapter)
    return Residency(
        share=share,
        adapters={r: tuple(sorted(set(a))) for r, a in adapters.items()},
        rate={(u.tenant, u.model, u.adapter): u.rate for u in units},
        status=status,
    )


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
