"""Build the whole service from its settings: the route path from the profile, replicas from
the fleet file, the plan store, the planner (solver in a worker process), the app."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from fastapi import FastAPI

from placement.domain.fleet import Fleet, load_fleet
from placement.domain.requests import DEFAULT_CLASSES
from placement.plan import Plan
from serving.admission.slo_gate import SloGate
from serving.api.main import create_app
from serving.api.runtime import build_runtime
from serving.api.settings import Settings
from serving.gateway import GatewaySettings, install_gateway
from serving.plan_store import open_plan_store
from serving.planner import Planner
from serving.route import PlacementRoutePath, ReplicaState, load_profile
from serving.service import PlacementService

DEMAND_WINDOW = 50_000  # recent requests the planner solves for
DEFAULT_PORT = 8000


def solve_in_worker(
    instance: Any, *, previous: Plan | None, time_limit_s: float, version: int
) -> Plan:
    """The planner's solve (module level: it is pickled into the worker process)."""
    from placement.solver.solve import solve_plan

    return solve_plan(instance, previous=previous, time_limit_s=time_limit_s, version=version)


def fleet_states(fleet: Fleet, addresses: Mapping[str, str] | None = None) -> list[ReplicaState]:
    """Replicas of a fleet file; the address is ``addresses[id]``, else the ``address`` label,
    else ``<id>:8000``."""
    given = addresses or {}
    return [
        ReplicaState(
            id=r.id,
            address=given.get(r.id) or r.labels.get("address", f"{r.id}:{DEFAULT_PORT}"),
            model=r.model.name,
            accelerator=r.accelerator.kind,
            tp=r.tp,
            kv_capacity_tokens=r.kv_capacity_tokens,
            labels=dict(r.labels),
        )
        for r in fleet.replicas
    ]


def build_app(
    settings: Settings,
    *,
    addresses: Mapping[str, str] | None = None,
    gateway: GatewaySettings | None = None,
) -> FastAPI:
    profile = load_profile(settings.profile) if settings.profile else load_profile()

    def route_path(replicas: dict[str, ReplicaState]) -> PlacementRoutePath:
        return PlacementRoutePath(list(replicas.values()), profile=profile)

    fleet = load_fleet(settings.fleet) if settings.fleet is not None else None
    service = PlacementService(
        route_path_factory=route_path,
        slo_gate=SloGate(
            DEFAULT_CLASSES,
            headroom=settings.slo_gate_headroom,
            tpot_headroom=settings.slo_gate_tpot_headroom,
        )
        if settings.slo_gate
        else None,
        no_plan_fallback=settings.no_plan_fallback,
        lease_s=settings.lease_s,
        demand_window=DEMAND_WINDOW if fleet is not None else 0,
    )
    for state in fleet_states(fleet, addresses) if fleet is not None else ():
        service.register_replica(state)
    store = open_plan_store(plan_dir=settings.plan_dir, redis_url=settings.redis_url)
    planner = None
    if fleet is not None:
        planner = Planner(
            solve=solve_in_worker,
            build_instance=lambda: _instance(fleet, service),
            store=store,
            install=service.install_plan,
            period_s=settings.solve_period_s,
            time_limit_s=settings.solve_time_limit_s,
            observe_solve=lambda result, s: service.metrics.solve_time.labels(result).observe(s),
        )
    app = create_app(build_runtime(settings, service=service, planner=planner))
    if gateway is not None and gateway.enabled:
        install_gateway(app, gateway)
    return app


def _instance(fleet: Fleet, service: PlacementService) -> Any:
    from placement.solver.instance import build_instance

    requests: Sequence[Any] = list(service.demand or ())
    unhealthy = [r for r, s in service.replicas.items() if not s.healthy]
    return build_instance(fleet, requests, {}, unhealthy=unhealthy, shed_unreachable=True)
