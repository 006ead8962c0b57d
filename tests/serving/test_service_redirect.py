"""A proxy's retry moves the request's lease and in-flight count to the fallback replica."""

from __future__ import annotations

from serving.route import PlacementRoutePath, ReplicaState
from serving.route.types import RouteQuery
from serving.service import PlacementService


def _state(i: int) -> ReplicaState:
    return ReplicaState(
        id=f"h100-{i}",
        address=f"10.0.0.{i}:8000",
        model="llama-3-8b",
        accelerator="H100-SXM",
        tp=1,
        kv_capacity_tokens=400_000,
    )


def test_redirect_moves_the_in_flight_count_and_completion_settles_it_there() -> None:
    service = PlacementService(
        route_path_factory=lambda r: PlacementRoutePath(list(r.values())),
        no_plan_fallback=True,
    )
    for i in range(3):
        service.register_replica(_state(i))
    routed = service.route(
        RouteQuery(
            tenant="acme",
            model="llama-3-8b",
            request_class="interactive",
            block_hashes=(),
            input_tokens=100,
            max_output_tokens=10,
        )
    )
    first = routed.decision.replica_id
    other = next(r for r in service.replicas if r != first)
    assert service.replicas[first].in_flight == 1
    service.redirect(routed.decision_id, other)
    assert service.replicas[first].in_flight == 0
    assert service.replicas[other].in_flight == 1
    assert service.lease(routed.decision_id).replica_id == other
    service.redirect(routed.decision_id, "nope")  # unknown replica: nothing moves
    assert service.replicas[other].in_flight == 1
    service.complete(routed.decision_id, output_tokens=10, ok=True)
    assert all(s.in_flight == 0 for s in service.replicas.values())
    assert service.admission.in_flight == 0
