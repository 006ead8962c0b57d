"""The fastest replica, and the SLO gate's second look at it before refusing."""

from __future__ import annotations

import pytest
from route_builders import NOW, chain, group, make_path, plan, query, route, states

from placement.domain.requests import DEFAULT_CLASSES
from serving.admission.slo_gate import SloGate
from serving.route import PlacementRoutePath, RouteQuery
from serving.route.path import FASTEST, PLAN, TPOT_ALPHA


def test_fastest_is_the_least_predicted_ttft_whatever_the_plan_says() -> None:
    fleet = states(3)
    path = make_path(fleet)
    c = chain(1, 2)
    path.install_plan(plan(fleet, groups=[group(c, route(["r0"]))]))
    fleet[0].in_flight_prefill_tokens = 400_000  # the planned replica is far behind
    fleet[1].in_flight_prefill_tokens = 20_000
    planned = path.decide(query(c), NOW)
    fastest = path.fastest(query(c), NOW)
    assert fastest is not None
    assert (planned.replica_id, planned.reason) == ("r0", PLAN)
    assert (fastest.replica_id, fastest.reason) == ("r2", FASTEST)
    assert fastest.predicted_ttft_s < planned.predicted_ttft_s


def test_gate_admits_on_the_fastest_replica_before_refusing() -> None:
    fleet = states(2)
    path = make_path(fleet)
    c = chain(7)
    path.install_plan(plan(fleet, groups=[group(c, route(["r0"]))]))
    fleet[0].in_flight_prefill_tokens = 400_000
    gate = SloGate(DEFAULT_CLASSES)
    planned = path.decide(query(c), NOW)
    assert planned.predicted_ttft_s > gate.limit_s("interactive")
    admitted = gate.admit_decision(path, query(c), planned, NOW)
    assert admitted is not None and admitted.replica_id == "r1"
    assert gate.vtc.is_active("acme")  # the prompt was charged
    # every replica behind: refused, and counted as an SLO refusal
    fleet[1].in_flight_prefill_tokens = 400_000
    assert gate.admit_decision(path, query(c), path.decide(query(c), NOW), NOW) is None
    assert gate.refused[("acme", "interactive")] == 1


def _complete(path: PlacementRoutePath, q: RouteQuery, *, first: float, done: float) -> None:
    decision = path.decide(q, first)
    path.on_dispatch(decision, q, first)
    path.on_first_token(decision.replica_id, q, first)
    path.on_complete(decision.replica_id, q, done, ok=True, output_tokens=11)


def test_observed_tpot_follows_completions_and_resets_when_idle() -> None:
    fleet = states(1)
    path = make_path(fleet)
    keep = query(tokens=10)
    path.on_dispatch(path.decide(keep, NOW), keep, NOW)  # one request stays in flight
    _complete(path, query(tokens=10), first=NOW, done=NOW + 2.0)  # 10 tokens after the first
    assert fleet[0].tpot_s == pytest.approx(TPOT_ALPHA * 0.2)
    _complete(path, query(tokens=10), first=NOW, done=NOW + 2.0)
    assert TPOT_ALPHA * 0.2 < fleet[0].tpot_s < 0.2
    path.on_complete("r0", keep, NOW + 3.0, ok=True, output_tokens=11)
    assert fleet[0].tpot_s == 0.0  # nothing in flight: nothing slows decoding


def test_gate_routes_around_a_replica_decoding_too_slowly() -> None:
    fleet = states(2)
    path = make_path(fleet)
    c = chain(3)
    path.install_plan(plan(fleet, groups=[group(c, route(["r0"]))]))
    gate = SloGate(DEFAULT_CLASSES)
    limit = gate.tpot_limit_s("interactive")
    assert limit == pytest.approx(0.1)
    fleet[0].tpot_s = 2 * limit  # the planned replica's TTFT is fine, its decoding is not
    admitted = gate.admit_decision(path, query(c), path.decide(query(c), NOW), NOW)
    assert admitted is not None and admitted.replica_id == "r1"
    # every replica decoding slowly is no reason to refuse one that would meet (an H100's
    # full-chunk step is within the SLO): it goes where the route path sent it
    fleet[1].tpot_s = 2 * limit
    admitted = gate.admit_decision(path, query(c), path.decide(query(c), NOW), NOW)
    assert admitted is not None and admitted.replica_id == "r0"
    assert path.fastest(query(c), NOW, max_tpot_s=limit) is None
    assert path.fastest(query(c), NOW, accept=lambda s: s.id == "r1") is not None


PLANNED_PROFILE = """
name: planned-test
block_tokens: 16
plan_picker: planned
filters: [health-filter]
scorers:
  - {name: queue-scorer, weight: 1.0}
"""


def test_with_the_planned_picker_fastest_looks_among_the_planned_replicas_first() -> None:
    from placement.plan import DefaultRoute

    fleet = states(4)
    path = make_path(fleet, PLANNED_PROFILE)
    # the batch tenant's planned replicas are r2 and r3; r0 (idle) is kept for others
    path.install_plan(
        plan(
            fleet,
            defaults=[DefaultRoute(tenant="acme", model="llama-3-8b", route=route(["r2", "r3"]))],
        )
    )
    fleet[2].in_flight_prefill_tokens = 40_000
    fleet[3].in_flight_prefill_tokens = 20_000
    fastest = path.fastest(query(), NOW)
    assert fastest is not None and fastest.replica_id == "r3"
    # none of its own decodes in time: the whole fleet
    fleet[2].tpot_s = fleet[3].tpot_s = 1.0
    fastest = path.fastest(query(), NOW, max_tpot_s=0.5)
    assert fastest is not None and fastest.replica_id in {"r0", "r1"}
    # the scored picker's fastest ignores the plan
    scored = make_path(
        fleet, PLANNED_PROFILE.replace("plan_picker: planned", "plan_picker: scored")
    )
    scored.install_plan(path.plan)
    got = scored.fastest(query(), NOW)
    assert got is not None and got.replica_id in {"r0", "r1"}
