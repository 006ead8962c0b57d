"""A client that takes route decisions and never reports their outcomes (the greedy client of
issue 19): it cannot lock out a tenant within its credit or a brand-new tenant, and its leases
expire by their predicted completion, not after a fixed 300 s. The real service object and
route path on 8 H100 replicas, on a clock the test moves."""

from __future__ import annotations

import contextlib
import math

import pytest

from placement.domain.requests import Tenant
from serving.admission import AdmissionController, class_budgets
from serving.leases import LeaseTerms
from serving.route import PlacementRoutePath, ReplicaState, RouteQuery
from serving.service import DEFAULT_IN_FLIGHT_PER_REPLICA, PlacementService, Refused

REPLICAS = 8
BUDGET = REPLICAS * DEFAULT_IN_FLIGHT_PER_REPLICA  # 512 in flight
B_SHARE = 0.3


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def make_service(clock: Clock, *, fixed: bool = False) -> PlacementService:
    """The service as wired; ``fixed``: as it was before issue 19 (every lease 300 s, no
    bound per tenant)."""
    admission = None
    if fixed:
        admission = AdmissionController(
            classes=class_budgets(fleet_in_flight=DEFAULT_IN_FLIGHT_PER_REPLICA),
            fleet_in_flight=DEFAULT_IN_FLIGHT_PER_REPLICA,
            bound_tenants=False,
        )
    service = PlacementService(
        route_path_factory=lambda r: PlacementRoutePath(list(r.values())),
        admission=admission,
        lease_terms=LeaseTerms(margin=1.0, floor_s=300.0, ceiling_s=300.0) if fixed else None,
        tenants={"b": Tenant(name="b", credit_share=B_SHARE)},
        clock=clock,
    )
    for i in range(REPLICAS):
        service.register_replica(
            ReplicaState(
                id=f"h100-{i}",
                address=f"10.0.0.{i}:8000",
                model="llama-3-8b",
                accelerator="H100-SXM",
                tp=1,
                kv_capacity_tokens=400_000,
                scraped_at=math.inf,  # no scraper here: never stale
            )
        )
    return service


def query(tenant: str, i: int, output_tokens: int = 128) -> RouteQuery:
    return RouteQuery(
        tenant=tenant,
        model="llama-3-8b",
        request_class="interactive",
        block_hashes=(hash((tenant, i)),),
        input_tokens=512,
        max_output_tokens=output_tokens,
    )


def take(service: PlacementService, tenant: str, n: int) -> list[str]:
    """Route ``n`` requests of ``tenant``; the decision ids of those admitted."""
    ids = []
    for i in range(n):
        with contextlib.suppress(Refused):
            ids.append(service.route(query(tenant, i)).decision_id)
    return ids


def test_a_greedy_client_locks_nobody_out() -> None:
    clock = Clock()
    service = make_service(clock)
    served_b = take(service, "b", 1)  # b is active, within its credit
    greedy = take(service, "a", 1000)  # a never reports any of these
    entitled_b = int(B_SHARE * BUDGET)
    assert len(greedy) == BUDGET - entitled_b
    with pytest.raises(Refused) as refused:
        service.route(query("a", 1001))
    assert refused.value.reason == "over_credit"
    # b is not refused up to its credit, and a brand-new tenant gets its floor
    assert len(served_b) + len(take(service, "b", entitled_b - 1)) == entitled_b
    assert len(take(service, "c", service.admission.tenant_floor())) == (
        service.admission.tenant_floor()
    )


def test_before_the_fix_the_same_client_locked_everyone_out() -> None:
    clock = Clock()
    service = make_service(clock, fixed=True)
    take(service, "b", 1)
    assert len(take(service, "a", 1000)) == BUDGET - 1
    assert take(service, "b", 10) == [] and take(service, "c", 10) == []
    clock.now = 299.0  # and for five minutes
    assert take(service, "c", 10) == []


def test_unreported_leases_expire_by_their_predicted_completion() -> None:
    clock = Clock()
    service = make_service(clock)
    terms = service.lease_terms
    greedy = take(service, "a", 100)
    leases = [service.lease(d) for d in greedy]
    for lease in leases:
        replica = service.replicas[lease.replica_id]
        # nothing observed yet: the roofline TPOT, margin × (TTFT + 128 tokens × TPOT) ≪ 300 s
        assert lease.expires_at <= terms.floor_s + 1e-9 or lease.expires_at < 60.0
        assert replica.tpot_s == 0.0
    last = max(lease.expires_at for lease in leases)
    assert last < terms.ceiling_s / 5
    clock.now = last + 0.001
    for _ in range(3):  # each decision sweeps at most 64 expired leases
        take(service, "b", 1)
    assert "a" not in service.admission.in_flight_by_tenant
    assert service.metrics.decision_stats.lease_expiries == 100
    with pytest.raises(Exception, match="no decision"):
        service.complete(greedy[0], output_tokens=1, ok=True)


def test_a_long_request_on_a_slow_replica_holds_its_lease_longer() -> None:
    clock = Clock()
    service = make_service(clock)
    for state in service.replicas.values():
        state.tpot_s = 0.08  # the router observed slow decoding everywhere
    decision = service.route(query("b", 0, output_tokens=1000)).decision_id
    # 1,000 tokens × 80 ms observed, twice over: 160 s
    assert service.lease(decision).expires_at == pytest.approx(160.0, rel=0.05)


def test_an_expired_lease_leaves_the_observed_tpot_alone_and_frees_its_prompt() -> None:
    clock = Clock()
    service = make_service(clock)
    first_id = service.route(query("a", 0)).decision_id
    first = service.lease(first_id)
    replica = service.replicas[first.replica_id]
    clock.now = 0.01
    # a second request in flight on the same replica, expiring later
    later = next(
        lease
        for lease in (service.lease(service.route(query("a", i)).decision_id) for i in range(1, 99))
        if lease.replica_id == first.replica_id
    )
    replica.tpot_s = 0.05  # as observed from earlier outcomes
    waiting = replica.in_flight_prefill_tokens
    clock.now = first.expires_at + 1e-6
    assert clock.now < later.expires_at
    service.route(query("b", 0))  # the decision that sweeps the first lease
    assert first_id not in service.leases
    # its first token was never reported, so nothing was timed: the TPOT stays as observed
    assert replica.tpot_s == 0.05
    # and its prompt no longer waits there (the sweeping request's own may)
    own = 512 if service.leases and replica.in_flight == 2 else 0
    assert replica.in_flight_prefill_tokens == waiting - 512 + own
