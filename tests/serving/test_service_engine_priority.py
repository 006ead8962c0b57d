"""The service sets each request's engine priority (vLLM ``priority``) when its replicas
schedule by it: by class, or by class and credit standing."""

from __future__ import annotations

from one_replica import one_h100

from placement.domain.requests import Tenant
from serving.route import PlacementRoutePath, RouteQuery
from serving.service import PlacementService


def _service(engine_priority: str | None) -> PlacementService:
    service = PlacementService(
        route_path_factory=lambda r: PlacementRoutePath(
            list(r.values()), by_priority=engine_priority is not None
        ),
        tenants={t: Tenant(name=t, credit_share=0.5) for t in ("a", "b")},
        engine_priority=engine_priority,
    )
    service.register_replica(one_h100())
    return service


def _query(tenant: str, request_class: str = "interactive", tokens: int = 100) -> RouteQuery:
    return RouteQuery(
        tenant=tenant,
        model="llama-3-8b",
        request_class=request_class,
        block_hashes=(1,),
        input_tokens=tokens,
        max_output_tokens=10,
    )


def test_without_engine_priority_nothing_is_set() -> None:
    routed = _service(None).route(_query("a", "batch"))
    assert routed.priority is None


def test_by_class_the_decision_and_its_lease_carry_the_class_priority() -> None:
    service = _service("class")
    routed = service.route(_query("a", "batch"))
    assert routed.priority == 1
    lease = service.leases.get(routed.decision_id)
    assert lease is not None and lease.query.priority == 1
    # the route path counts its prompt among priority 1's, and lets it go at its first token
    state = service.replicas["h100-0"]
    assert state.prefill_tokens_by_priority == {1: 100}
    service.first_token(routed.decision_id)
    assert state.prefill_tokens_by_priority == {}
    assert service.route(_query("a", "interactive")).priority == 0


def test_by_credit_the_tenant_over_its_share_goes_after_the_owed_one() -> None:
    service = _service("credit")
    for q in (_query("a"), _query("b"), _query("a", tokens=20_000)):
        service.route(q)
    assert service.route(_query("b")).priority == 0
    assert service.route(_query("a")).priority == 1
