"""The replicas a plan keeps to some request classes (placement.solver.chunk_split) take no
other class's requests, whatever the picker or the second look would prefer."""

from __future__ import annotations

import dataclasses

from route_builders import NOW, make_path, plan, query, scored_profile, states

from placement.plan import Plan
from serving.route import RouteQuery
from serving.route.types import ReplicaState

SCORED_PROFILE = scored_profile("queue-scorer")


def _plan(fleet: list[ReplicaState], classes: dict[str, tuple[str, ...]]) -> Plan:
    p = plan(fleet)
    return p.model_copy(
        update={
            "replicas": tuple(
                r.model_copy(update={"classes": classes.get(r.id, ())}) for r in p.replicas
            )
        }
    )


def _of(cls: str) -> RouteQuery:
    return dataclasses.replace(query(), request_class=cls)


def test_a_replica_kept_for_batch_takes_no_interactive_request() -> None:
    fleet = states(3)
    path = make_path(fleet, SCORED_PROFILE)
    path.install_plan(_plan(fleet, {"r0": ("interactive",), "r2": ("batch",)}))
    fleet[0].in_flight = fleet[1].in_flight = 50  # r2 is the idlest by far
    assert path.decide(_of("interactive"), NOW).replica_id in {"r0", "r1"}
    assert path.decide(_of("batch"), NOW).replica_id == "r2"
    # the admission gate's second look keeps to them too
    fastest = path.fastest(_of("interactive"), NOW)
    assert fastest is not None and fastest.replica_id in {"r0", "r1"}
    fleet[2].in_flight = 100
    assert path.decide(_of("batch"), NOW).replica_id == "r1"  # r0 is kept for interactive


def test_with_none_of_its_replicas_up_a_class_goes_to_any_healthy_one() -> None:
    fleet = states(2)
    path = make_path(fleet, SCORED_PROFILE)
    path.install_plan(_plan(fleet, {"r0": ("interactive",), "r1": ("batch",)}))
    fleet[0].healthy = False
    assert path.decide(_of("interactive"), NOW).replica_id == "r1"


def test_a_plan_that_keeps_no_replica_apart_routes_every_class_anywhere() -> None:
    fleet = states(2)
    path = make_path(fleet, SCORED_PROFILE)
    path.install_plan(_plan(fleet, {}))
    fleet[0].in_flight = 50
    assert path.decide(_of("interactive"), NOW).replica_id == "r1"
    assert path.decide(_of("batch"), NOW).replica_id == "r1"
