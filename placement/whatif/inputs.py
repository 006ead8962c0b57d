"""A case's solver inputs: its fleet, requests, tenants, classes and capacity source.

Everything here is a pure function of the scenario and the case, so a case can be rebuilt on
any worker. The expensive parts (the workload, the latency model, capacity tables) are cached
per process: a worker that runs ten cases of a sweep builds each capacity table once.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from models.capacity import DEFAULT_SLOS, Slo
from placement.domain.accelerators import Accelerator, get_accelerator
from placement.domain.fleet import Fleet, fleet_from_dict
from placement.domain.requests import Request, RequestClass, Tenant
from placement.plan.capacity_source import ROOFLINE_SOURCE
from placement.solver.capacity import (
    CapacityLookup,
    CapacitySource,
    FixedCapacity,
)
from placement.whatif.changes import (
    apply_fleet_changes,
    apply_slo_changes,
    apply_tenant_changes,
    check_demand_names,
    scale_demand,
)
from placement.whatif.scenario import CapacityMode, Case, Changes, Scenario
from sim.workloads.base import Workload
from sim.workloads.registry import load_workload


@dataclass(frozen=True, slots=True, kw_only=True)
class CaseInputs:
    fleet: Fleet
    fleet_doc: dict[str, Any]
    requests: list[Request]
    tenants: dict[str, Tenant]
    classes: dict[str, RequestClass]
    block_tokens: int
    window_s: float


@lru_cache(maxsize=8)
def base_workload(name: str, seed: int, window_s: float) -> Workload:
    """The base window of a workload (cached per process; callers never mutate it)."""
    return load_workload(name, seed=seed, duration_s=window_s)


@lru_cache(maxsize=4)
def _latency_model(mode: CapacityMode) -> tuple[Any, str]:
    """The latency model for ``mode`` and its source label (None: the roofline prior)."""
    if mode == "prior":
        return None, ROOFLINE_SOURCE
    try:
        from training.promote import load_champion

        champion = load_champion()
        return champion.predictor, champion.source
    except Exception:  # PredictorUnavailable, or the tracking store failing to open
        if mode == "champion":
            raise
        return None, ROOFLINE_SOURCE


_TABLES: dict[tuple[str, Accelerator, str, int, tuple[Slo, ...]], CapacityLookup] = {}


@dataclass(frozen=True, slots=True)
class CatalogueCapacity:
    """Capacity at SLO per replica kind from the champion predictor or the prior, tabulated at
    ``slos`` (every SLO the scenario's cases use, so each case finds its own level) and cached
    per process by the accelerator's *figures* (a scenario's new kind included)."""

    mode: CapacityMode
    slos: tuple[Slo, ...] = DEFAULT_SLOS

    @property
    def source(self) -> str:
        return str(_latency_model(self.mode)[1])

    def table(self, accelerator: str, model: str, tp: int) -> CapacityLookup:
        from models.capacity import build_capacity_table, replica_kind

        latency, source = _latency_model(self.mode)
        key = (source, get_accelerator(accelerator), model, tp, self.slos)
        if key not in _TABLES:
            _TABLES[key] = build_capacity_table(
                replica_kind(accelerator, model, tp), latency, slos=self.slos
            )
        return _TABLES[key]


def scenario_slos(scenario: Scenario) -> tuple[Slo, ...]:
    """Every (TTFT, TPOT) SLO a case of the scenario asks for, the workload's own included."""
    classes = base_workload(scenario.workload, scenario.seed, scenario.window_s).classes
    changes = [c.changes for c in scenario.cases]
    if scenario.capacity_question is not None:
        changes.append(scenario.capacity_question.changes)
    levels = {Slo(c.ttft_slo_s, c.tpot_slo_s) for c in classes.values()}
    for ch in changes:
        for name, slo in ch.slos.items():
            c = classes.get(name)
            if c is not None:
                levels.add(
                    Slo(
                        c.ttft_slo_s if slo.ttft_slo_s is None else slo.ttft_slo_s,
                        c.tpot_slo_s if slo.tpot_slo_s is None else slo.tpot_slo_s,
                    )
                )
    return tuple(sorted(levels, key=lambda s: (s.ttft_p95_s, s.tpot_p95_s)))


def capacity_source(scenario: Scenario) -> CapacitySource:
    if scenario.fixed_capacity is not None:
        return FixedCapacity(
            {get_accelerator(k).kind: v for k, v in scenario.fixed_capacity.items()},
            source="fixed",
        )
    return CatalogueCapacity(scenario.capacity, scenario_slos(scenario))


def fleet_document(scenario: Scenario, changes: Changes, *, where: str) -> dict[str, Any]:
    """The case's fleet document (call with the scenario's accelerators registered)."""
    return apply_fleet_changes(scenario.fleet, changes, source=scenario.source, where=where)


def case_inputs(scenario: Scenario, case: Case, *, fleet_changes: bool = True) -> CaseInputs:
    """Build a case's inputs; call with the scenario's accelerators registered. Errors name
    the case's field."""
    src, where = scenario.source, case.where
    wl = base_workload(scenario.workload, scenario.seed, scenario.window_s)
    changes = case.changes
    doc = fleet_document(scenario, changes, where=where) if fleet_changes else dict(scenario.fleet)
    fleet = fleet_from_dict(doc, source=f"{src} ({where} fleet)")
    classes = apply_slo_changes(wl.classes, changes.slos, source=src, where=where)
    tenant_names = sorted(set(wl.tenants) | {r.tenant for r in wl.requests})
    known = {n: wl.tenants.get(n, Tenant(name=n, credit_share=0.0)) for n in tenant_names}
    tenants = apply_tenant_changes(known, scenario.base_tenants, source=src, where="base")
    tenants = apply_tenant_changes(tenants, changes.tenants, source=src, where=where)
    check_demand_names(scenario.base_demand, tenant_names, list(classes), source=src, where="base")
    check_demand_names(changes.demand, tenant_names, list(classes), source=src, where=where)
    demand = scenario.base_demand.times(changes.demand)
    requests = scale_demand(wl.requests, demand, seed=scenario.seed)
    return CaseInputs(
        fleet=fleet,
        fleet_doc=doc,
        requests=requests,
        tenants=tenants,
        classes=classes,
        block_tokens=wl.block_tokens,
        window_s=scenario.window_s,
    )
