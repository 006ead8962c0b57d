"""Build the whole service from its settings: the route path from the profile, replicas from
the fleet file, the plan store, the planner (solver in a worker process), the app."""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import Executor

from fastapi import FastAPI

from placement.domain.fleet import Fleet, load_fleet
from placement.domain.requests import DEFAULT_CLASSES
from placement.domain.tenancy import load_tenancy
from placement.errors import InputError
from placement.solver.capacity import CapacitySource
from placement.solver.pooled_attainment import attainment_for
from serving.admission.slo_gate import SloGate
from serving.api.main import create_app
from serving.api.runtime import build_runtime
from serving.api.settings import Settings
from serving.batch import batch_companions
from serving.gateway import GatewaySettings, install_gateway
from serving.leases import LeaseTerms
from serving.plan_store import open_plan_store
from serving.plan_store.redis import RedisPlanStore
from serving.planner import Planner
from serving.planning import ServicePlanning, solve_in_worker
from serving.route import PlacementRoutePath, ReplicaState, load_profile
from serving.service import PlacementService
from serving.shared import RedisSharedState, SharedSync, process_id
from serving.tenants import LiveTenancy
from serving.whatif_job import solve_whatif, whatif_context

DEMAND_WINDOW = 50_000  # recent requests the planner solves for
DEFAULT_PORT = 8000


def fleet_states(
    fleet: Fleet,
    addresses: Mapping[str, str] | None = None,
    *,
    require_addresses: bool = False,
    source: str | None = None,
) -> list[ReplicaState]:
    """Replicas of a fleet file; the address is ``addresses[id]``, else the ``address`` label,
    else ``<id>:8000`` — a guess a production service refuses (``require_addresses``): a
    request routed to a host that does not exist helps nobody."""
    given = addresses or {}
    if require_addresses:
        missing = [r.id for r in fleet.replicas if r.id not in given and "address" not in r.labels]
        if missing:
            raise InputError(
                f"replicas {', '.join(missing[:5])}{' …' if len(missing) > 5 else ''} have no "
                "address",
                source=source,
                field="replicas[].labels.address",
                expected="host:port of each replica's engine (the default <id>:8000 is only "
                "guessed in development)",
            )
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
    solve_executor: Executor | None = None,
    capacity: CapacitySource | None = None,
    gateway: GatewaySettings | None = None,
) -> FastAPI:
    """The app for ``settings`` (with the OpenAI-compatible gateway in front when ``gateway``
    is enabled). Seams for tests: ``solve_executor`` replaces the planner's worker processes
    (solves in threads), ``capacity`` the capacity at SLO the solver loads."""
    profile = load_profile(settings.profile) if settings.profile else load_profile()

    def route_path(replicas: dict[str, ReplicaState]) -> PlacementRoutePath:
        return PlacementRoutePath(
            list(replicas.values()),
            profile=profile,
            by_priority=settings.engine_priority is not None,
        )

    fleet = load_fleet(settings.fleet) if settings.fleet is not None else None
    gpus = float(sum(r.tp for r in fleet.replicas)) if fleet is not None else None
    tenancy = (
        load_tenancy(settings.tenants_file, fleet_gpus=gpus)
        if settings.tenants_file is not None
        else None
    )
    service = PlacementService(
        route_path_factory=route_path,
        slo_gate=SloGate(
            DEFAULT_CLASSES,
            headroom=settings.slo_gate_headroom,
            tpot_headroom=settings.slo_gate_tpot_headroom,
            overload_refuse_at=settings.slo_gate_overload_refuse_at,
            strict_refuse_at=settings.slo_gate_strict_refuse_at,
            cold_move_ttft_share=settings.slo_gate_cold_move_ttft_share,
            tpot_by_work=settings.slo_gate_tpot_by_work,
            tpot_computed=settings.slo_gate_tpot_computed,
            tpot_shed_from=settings.slo_gate_tpot_shed_from,
            pressure_by_model=settings.slo_gate_pressure_by_model,
            credit_reserve=settings.slo_gate_credit_reserve,
            share_cap=settings.slo_gate_share_cap,
            share_window_s=settings.slo_gate_share_window_s,
            slot_turn_s=settings.slo_gate_slot_turn_s,
            # a slot wait read from the engine: a refusal it alone makes is for a slot
            slot_wait_from_engine=profile.slot_wait_from_engine,
        )
        if settings.slo_gate
        else None,
        no_plan_fallback=settings.no_plan_fallback,
        lease_terms=LeaseTerms(
            margin=settings.lease_margin,
            floor_s=settings.lease_floor_s,
            ceiling_s=settings.lease_s,
        ),
        tenants=tenancy.tenants if tenancy is not None else None,
        reject_unknown_tenants=settings.unknown_tenants == "reject",
        demand_window=DEMAND_WINDOW if fleet is not None else 0,
        engine_priority=settings.engine_priority,
    )
    production = settings.environment == "production"
    states = (
        fleet_states(
            fleet,
            addresses,
            require_addresses=production,
            source=str(settings.fleet),
        )
        if fleet is not None
        else []
    )
    for state in states:
        service.register_replica(state)
    store = open_plan_store(plan_dir=settings.plan_dir, redis_url=settings.redis_url)
    shared = (
        RedisSharedState(
            store.client, prefix=store.prefix, process=process_id(), ttl_s=settings.shared_ttl_s
        )
        if isinstance(store, RedisPlanStore)
        else None
    )
    planner = None
    if fleet is not None:
        planning = ServicePlanning(
            fleet,
            service,
            capacity=capacity,
            shared_demand=shared.demand_chunks if shared is not None else None,
            window=DEMAND_WINDOW,
            attainment=attainment_for(profile.plan_picker),
        )
        planner = Planner(
            solve=solve_in_worker,
            snapshot=planning.snapshot,
            encode=planning.encode,
            validate=planning.validate,
            store=store,
            install=service.install_plan,
            period_s=settings.solve_period_s,
            time_limit_s=settings.solve_time_limit_s,
            observe_solve=lambda result, s: service.metrics.solve_time.labels(result).observe(s),
            executor=solve_executor,
        )
    # what-if runs where a planner does: on this fleet and the planner's demand window
    planned = fleet is not None and settings.fleet is not None
    runtime = build_runtime(
        settings,
        service=service,
        planner=planner,
        whatif=solve_whatif if planned else None,
        whatif_context=whatif_context(settings.fleet, service)
        if planned and settings.fleet is not None
        else None,
        tenancy=LiveTenancy(service, store),
        tenants_doc=tenancy.doc if tenancy is not None else None,
    )
    if shared is not None:  # after the counters were restored: they are the base it adds to
        runtime.shared = SharedSync(
            service,
            shared,
            tenancy=runtime.tenancy,
            interval_s=settings.shared_interval_s,
            ttl_s=settings.shared_ttl_s,
        )
    app = create_app(runtime)
    if gateway is not None and gateway.enabled:
        install_gateway(app, gateway, batch_companions)
    return app
