"""Service processes sharing one fleet through a real Redis, as two services in one test
process (each with its own SharedSync): demand, credit counters, usage, admission state,
replica health and tenants; Redis lost and back."""

from __future__ import annotations

import asyncio
import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1]))
from redis_server import RedisServer

from placement.domain.fleet import load_fleet
from serving.plan_store.redis import RedisPlanStore
from serving.planning import ServicePlanning
from serving.route import PlacementRoutePath, ReplicaState, RouteQuery
from serving.service import PlacementService
from serving.shared import RedisSharedState, SharedSync
from serving.tenants import LiveTenancy

FLEET = """\
name: pair
replicas:
  - kind: llama
    accelerator: H100-SXM
    count: 2
    model: llama-3-8b
"""
TENANCY = {"tenants": {"acme": {"credit_share": 0.5}, "globex": {"credit_share": 0.3}}}


class Process:
    """One service process's parts: the service, its tenancy, its exchange with the others."""

    def __init__(self, url: str, name: str) -> None:
        self.service = PlacementService(
            route_path_factory=lambda r: PlacementRoutePath(list(r.values())), demand_window=1000
        )
        for i in range(2):
            self.service.register_replica(
                ReplicaState(
                    id=f"llama-{i}",
                    address=f"10.0.0.{i}:8000",
                    model="llama-3-8b",
                    accelerator="H100-SXM",
                    tp=1,
                    kv_capacity_tokens=400_000,
                    scraped_at=math.inf,
                )
            )
        self.store = RedisPlanStore(url, timeout_s=0.5)
        self.tenancy = LiveTenancy(self.service, self.store)
        self.state = RedisSharedState(
            self.store.client, prefix=self.store.prefix, process=name, ttl_s=1.0
        )
        self.sync = SharedSync(
            self.service, self.state, tenancy=self.tenancy, interval_s=0.05, ttl_s=1.0
        )

    def route(self, tenant: str, *, request_class: str = "interactive", tokens: int = 100) -> str:
        return self.service.route(
            RouteQuery(
                tenant=tenant,
                model="llama-3-8b",
                request_class=request_class,
                block_hashes=(hash(tenant) & 0xFFFF,),
                input_tokens=tokens,
                max_output_tokens=10,
            )
        ).decision_id

    def tick(self) -> bool:
        return asyncio.run(self.sync.tick())


def _both(a: Process, b: Process, rounds: int = 2) -> None:
    for _ in range(rounds):
        assert a.tick() and b.tick()


@pytest.fixture
def pair(redis_server: RedisServer) -> tuple[Process, Process]:
    a, b = Process(redis_server.url, "a"), Process(redis_server.url, "b")
    a.tenancy.start(TENANCY)
    b.tenancy.start(None)  # the store has A's: B applies it
    return a, b


def test_demand_credits_usage_and_admission_are_the_fleets(
    pair: tuple[Process, Process], tmp_path: Path
) -> None:
    a, b = pair
    assert b.service.admission.credit_share("acme") == 0.5
    held = [a.route("acme", tokens=1000) for _ in range(3)]
    b.route("globex", request_class="batch", tokens=10)
    _both(a, b)
    # each process admits against what the other holds
    assert b.service.admission.elsewhere == 3
    assert b.service.admission.elsewhere_by_tenant == {"acme": 3}
    assert a.service.admission.sheddable_elsewhere == 1
    # the credit counters are the fleet's in both
    assert a.service.admission.vtc.counters == pytest.approx(b.service.admission.vtc.counters)
    charged = b.service.admission.vtc.counters["acme"]
    assert charged > 0 and "acme" not in b.service.admission.in_flight_by_tenant  # A's charge
    # usage: B reads A's requests
    assert b.service.usage.view("acme", credit_share=0.5).requests == 3
    a.service.complete(held[0], output_tokens=10, ok=True, ttft_s=0.1)
    _both(a, b)
    assert b.service.admission.elsewhere == 2
    assert b.service.usage.view("acme", credit_share=0.5).slo_met == 1
    # the planner of either process solves for both processes' requests
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(FLEET)
    planning = ServicePlanning(
        load_fleet(fleet), b.service, shared_demand=b.state.demand_chunks, window=1000
    )
    inputs = planning.encode(planning.snapshot())
    from serving.demand import decode_demand

    demand = decode_demand(inputs.demand)
    assert sorted((r.tenant, r.request_class) for r in demand) == [
        ("acme", "interactive"),
        ("acme", "interactive"),
        ("acme", "interactive"),
        ("globex", "batch"),
    ]


def test_a_replica_one_process_finds_down_is_avoided_by_all(
    pair: tuple[Process, Process],
) -> None:
    a, b = pair
    a.service.mark_health("llama-0", False)
    _both(a, b)
    assert not b.service.replicas["llama-0"].healthy
    assert {b.service.route_path.decide(_q(), 0).replica_id for _ in range(20)} == {"llama-1"}
    b.service.mark_health("llama-0", True)  # B's own scrape finds it fine: A's view still counts
    assert not b.service.replicas["llama-0"].healthy
    a.service.mark_health("llama-0", True)
    _both(a, b)
    assert b.service.replicas["llama-0"].healthy


def _q() -> RouteQuery:
    return RouteQuery(
        tenant="acme",
        model="llama-3-8b",
        request_class="interactive",
        block_hashes=(),
        input_tokens=10,
        max_output_tokens=10,
    )


def test_an_admin_edit_in_one_process_applies_in_every_one(pair: tuple[Process, Process]) -> None:
    a, b = pair
    a.tenancy.put_tenant("acme", {"credit_share": 0.2}, create=False)
    _both(a, b)
    assert b.service.admission.credit_share("acme") == pytest.approx(0.2)
    assert b.tenancy.version == a.tenancy.version


def test_redis_lost_routing_goes_on_locally_and_converges_when_back(
    pair: tuple[Process, Process], redis_server: RedisServer
) -> None:
    a, b = pair
    a.route("acme", tokens=500)
    b.route("globex", tokens=200)
    _both(a, b)
    before = dict(a.service.admission.vtc.counters)
    assert b.service.admission.elsewhere == 1
    redis_server.stop()
    assert not a.tick() and not b.tick()
    ok, detail = a.sync.health()
    assert not ok and "unreachable" in detail and "local state" in detail
    a.route("acme", tokens=100)  # routing never waits on Redis
    b.sync.last_ok = -math.inf  # the others' state is older than its time to live
    assert not b.tick()
    assert b.service.admission.elsewhere == 0  # admits on its own counts alone
    redis_server.start()  # back, empty (no persistence), as a replaced Redis
    for _ in range(3):
        a.tick()
        b.tick()
    assert a.sync.connected and b.sync.connected
    # the counters converge: A re-seeded its own (set first), B took them
    assert a.service.admission.vtc.counters == pytest.approx(b.service.admission.vtc.counters)
    assert a.service.admission.vtc.counters["acme"] >= before["acme"]
    assert b.service.admission.elsewhere == 2  # A's two requests, still in flight
    # the tenants came back to the store from the processes
    assert a.store.tenancy_version() == a.tenancy.version > 0
    # and usage: both processes' counts re-seeded once, not twice
    assert b.service.usage.view("acme", credit_share=0.5).requests == 2
    assert a.service.usage.view("globex", credit_share=0.3).requests == 1
