"""Test doubles and builders for the API tests: a tiny route path implementing the protocol."""

from __future__ import annotations

import time
from collections.abc import Callable

from placement.plan import Plan
from serving.admission.slo_gate import SloGate
from serving.api.main import create_app
from serving.api.runtime import ServiceRuntime, build_runtime
from serving.api.security import hash_key
from serving.api.settings import ApiKey, Settings
from serving.planner import Planner
from serving.route.types import Decision, NoReplica, ReplicaState, RouteQuery, UnservedModel
from serving.service import PlacementService

ADMIN_KEY = "admin-key-0123456789"
ROUTE_KEY = "route-key-0123456789"
OTHER_ROUTE_KEY = "other-route-key-0123456789"
ACME_KEY = "acme-key-0123456789"
TELEMETRY_KEY = "telemetry-key-0123456789"
METRICS_KEY = "metrics-key-0123456789"


class FakeRoutePath:
    """Least in-flight healthy replica of the model; ``plan`` when a plan is installed. As the
    real route path: a model with no registered replica is unserved, one with none healthy
    has no replica."""

    def __init__(self, replicas: dict[str, ReplicaState]) -> None:
        self.replicas = replicas
        self.plan: Plan | None = None
        self.completed: list[tuple[str, bool]] = []

    def install_plan(self, plan: Plan | None) -> None:
        self.plan = plan

    def decide(self, query: RouteQuery, now: float) -> Decision:
        if all(r.model != query.model for r in self.replicas.values()):
            raise UnservedModel(f"no registered replica serves model {query.model!r}")
        candidates = sorted(
            (r for r in self.replicas.values() if r.healthy and r.model == query.model),
            key=lambda r: (r.in_flight, r.id),
        )
        if not candidates:
            raise NoReplica(f"no healthy replica serves {query.model}")
        best = candidates[0]
        return Decision(
            replica_id=best.id,
            address=best.address,
            reason="plan" if self.plan is not None else "fallback:no_plan",
            plan_version=None if self.plan is None else self.plan.version,
            predicted_ttft_s=0.05,
            fallbacks=tuple(r.id for r in candidates[1:]),
        )

    def fastest(
        self,
        query: RouteQuery,
        now: float,
        *,
        max_tpot_s: float = float("inf"),
        accept: Callable[[ReplicaState], bool] | None = None,
    ) -> Decision | None:
        return self.decide(query, now)

    def on_dispatch(self, decision: Decision, query: RouteQuery, now: float) -> None:
        self.replicas[decision.replica_id].in_flight += 1

    def on_first_token(self, replica_id: str, query: RouteQuery, now: float) -> None:
        pass

    def replica(self, replica_id: str) -> ReplicaState | None:
        return self.replicas.get(replica_id)

    def on_complete(
        self,
        replica_id: str,
        query: RouteQuery,
        now: float,
        *,
        ok: bool,
        output_tokens: int | None = None,
    ) -> None:
        state = self.replicas.get(replica_id)
        if state is not None:
            state.in_flight -= 1
        self.completed.append((replica_id, ok))


def keys() -> tuple[ApiKey, ...]:
    return (
        ApiKey(name="ops", digest=hash_key(ADMIN_KEY), scopes=("admin", "route", "telemetry")),
        ApiKey(name="gateway", digest=hash_key(ROUTE_KEY), scopes=("route",)),
        ApiKey(name="gateway-2", digest=hash_key(OTHER_ROUTE_KEY), scopes=("route",)),
        ApiKey(
            name="acme", digest=hash_key(ACME_KEY), scopes=("route", "telemetry"), tenant="acme"
        ),
        ApiKey(name="scraper", digest=hash_key(TELEMETRY_KEY), scopes=("telemetry",)),
        ApiKey(name="prometheus", digest=hash_key(METRICS_KEY), scopes=("metrics",)),
    )


def replica(i: int, model: str = "llama-3-8b") -> ReplicaState:
    return ReplicaState(
        id=f"h100-{i}",
        address=f"10.0.0.{i + 1}:8000",
        model=model,
        accelerator="H100-SXM",
        tp=1,
        kv_capacity_tokens=400_000,
    )


def make_plan(version: int = 1, *, objective: float = 1.0, digest: str = "d1") -> Plan:
    return Plan.model_validate(
        {
            "schema": "placement.plan/v1",
            "version": version,
            "created_at": time.time(),
            "fleet": "test",
            "inputs_digest": digest,
            "capacity_source": "roofline-prior",
            "solver": {
                "backend": "greedy",
                "status": "greedy",
                "objective": objective,
                "bound": objective,
                "gap": 0.0,
                "solve_s": 0.0,
                "time_limit_s": 1.0,
            },
            "replicas": [],
            "tenants": [
                {
                    "tenant": "acme",
                    "demand_rps": 1.0,
                    "admitted_rps": 1.0,
                    "guaranteed_share": 0.5,
                    "cap_share": 1.0,
                }
            ],
        }
    )


def make_runtime(
    *,
    replicas: int = 2,
    plan: Plan | None = None,
    planner: Planner | None = None,
    in_flight_per_replica: int = 64,
    no_plan_fallback: bool = False,
    slo_gate: SloGate | None = None,
    engine_priority: str | None = None,
    **settings: object,
) -> ServiceRuntime:
    config = Settings(environment="production", api_keys=keys(), **settings)  # type: ignore[arg-type]
    service = PlacementService(
        route_path_factory=FakeRoutePath,
        in_flight_per_replica=in_flight_per_replica,
        no_plan_fallback=no_plan_fallback,
        slo_gate=slo_gate,
        engine_priority=engine_priority,
    )
    for i in range(replicas):
        service.register_replica(replica(i))
    if plan is not None:
        service.install_plan(plan)
    return build_runtime(config, service=service, planner=planner, background=False)


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


__all__ = ["create_app"]
