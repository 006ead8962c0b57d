"""Each greedy fallback fires in its situation, labelled with its reason."""

from __future__ import annotations

import pytest
from route_builders import NOW, TEST_PROFILE, chain, group, make_path, plan, query, route, states

from placement.plan import DefaultRoute, Plan
from serving.route import NoReplica, ReplicaState, RouteQuery, UnservedModel


def _hot(fleet: list[ReplicaState], *, cap_rps: float = 100.0) -> tuple[tuple[int, ...], Plan]:
    c = chain(1, 2)
    p = plan(fleet, groups=[group(c, route(["r0"], secondary=["r1"]))], cap_rps=cap_rps)
    return c, p


def test_no_plan_uses_cache_and_load(four: list[ReplicaState]) -> None:
    path = make_path(four)
    q = query(chain(1, 2, 3), tokens=50)  # three 16-token blocks: the prompt is its prefix
    first = path.decide(q, NOW)
    assert first.reason == "fallback:no-plan" and first.plan_version is None
    path.on_dispatch(first, q, NOW)
    # the prefix now lives where it was sent: the same prompt goes there again despite its load
    again = query(chain(1, 2, 3), tokens=50)
    assert path.decide(again, NOW).replica_id == first.replica_id
    # a prompt with no cached prefix avoids the loaded replica
    other = path.decide(query(chain(9), tokens=50), NOW)
    assert other.replica_id != first.replica_id


def test_unseen_prefix_uses_bounded_load_hashing(four: list[ReplicaState]) -> None:
    path = make_path(four)
    path.install_plan(plan(four, groups=[group(chain(50), route(["r0"]))]))
    q = query(chain(1, 2), tenant="no-default")
    d = path.decide(q, NOW)
    assert d.reason == "fallback:unseen-prefix"
    assert path.decide(query(chain(1, 2, 3), tenant="no-default"), NOW).replica_id == d.replica_id
    # load the chosen replica past the bound: the same key moves on along the ring
    for _ in range(3):
        path.on_dispatch(d, query(), NOW)
    moved = path.decide(q, NOW)
    assert moved.reason == "fallback:unseen-prefix" and moved.replica_id != d.replica_id


def test_unseen_prefix_load_stays_bounded() -> None:
    fleet = states(8)
    path = make_path(fleet)
    path.install_plan(plan(fleet))
    open_queries: list[RouteQuery] = []
    for _ in range(80):  # one hot prefix, never completing
        q = query(chain(1, 2), tenant="t")
        path.on_dispatch(path.decide(q, NOW), q, NOW)
        open_queries.append(q)
    loads = [s.in_flight for s in fleet]
    assert sum(loads) == 80
    assert max(loads) <= 13  # ceil(1.25 · 80 / 8) = 13


def test_a_prompt_with_no_full_block_is_spread_by_load() -> None:
    # nothing to be affine to: hashing the tenant on the ring would fill the replicas clockwise
    # to the load bound and leave the last ones idle; the load scores spread them evenly
    fleet = states(8)
    path = make_path(fleet)
    path.install_plan(plan(fleet))
    for _ in range(80):
        q = query(tenant="t")
        d = path.decide(q, NOW)
        assert d.reason == "fallback:no-prefix"
        path.on_dispatch(d, q, NOW)
    loads = [s.in_flight for s in fleet]
    assert sum(loads) == 80 and max(loads) - min(loads) <= 1


@pytest.mark.parametrize(
    ("breakage", "reason"),
    [
        ("down", "fallback:unhealthy"),
        ("stale", "fallback:stale"),
        ("loaded", "fallback:over-cap"),
    ],
)
def test_planned_replica_unavailable_goes_to_least_predicted_ttft(
    breakage: str, reason: str
) -> None:
    fleet = states(4)
    c = chain(4, 5)
    path = make_path(fleet)
    path.install_plan(plan(fleet, groups=[group(c, route(["r0"]))], cap_rps=2.0))
    if breakage == "down":
        fleet[0].healthy = False
    elif breakage == "stale":
        fleet[0].scraped_at = NOW - 60.0
    else:
        fleet[0].in_flight = 2  # cap: ceil(2 rps × 1 s residence) = 2
    fleet[1].in_flight_prefill_tokens = 50_000
    fleet[2].in_flight_prefill_tokens = 500
    fleet[3].in_flight_prefill_tokens = 20_000
    d = path.decide(query(c), NOW)
    assert (d.reason, d.replica_id) == (reason, "r2")
    assert d.predicted_ttft_s > 0
    assert "r0" not in d.fallbacks


def test_over_cap_spills_to_secondary() -> None:
    fleet = states(4)
    c, p = _hot(fleet, cap_rps=2.0)
    path = make_path(fleet)
    path.install_plan(p)
    assert path.decide(query(c), NOW).replica_id == "r0"
    fleet[0].in_flight = 5
    d = path.decide(query(c), NOW)
    assert (d.reason, d.replica_id) == ("fallback:spill", "r1")


def test_spill_can_be_turned_off_in_the_profile() -> None:
    fleet = states(4)
    c, p = _hot(fleet, cap_rps=2.0)
    path = make_path(fleet, TEST_PROFILE + "fallbacks: {spill_to_secondary: false}\n")
    path.install_plan(p)
    fleet[0].in_flight = 5
    assert path.decide(query(c), NOW).reason == "fallback:over-cap"


def test_unhealthy_primary_is_avoided_within_the_plan() -> None:
    fleet = states(3)
    c = chain(6)
    path = make_path(fleet)
    path.install_plan(plan(fleet, groups=[group(c, route(["r0", "r1"], [0.5, 0.5]))]))
    fleet[0].healthy = False
    decisions = [path.decide(query(c), NOW) for _ in range(50)]
    assert {(d.replica_id, d.reason) for d in decisions} == {("r1", "plan")}


def test_stale_everywhere_still_routes_to_a_healthy_replica(four: list[ReplicaState]) -> None:
    path = make_path(four)
    path.install_plan(
        plan(four, defaults=[DefaultRoute(tenant="acme", model="llama-3-8b", route=route(["r0"]))])
    )
    for s in four:
        s.scraped_at = -1.0
    four[0].healthy = False
    d = path.decide(query(chain(1)), NOW)
    assert d.reason == "fallback:unhealthy" and d.replica_id != "r0"


def test_no_replica_when_every_replica_is_down(four: list[ReplicaState]) -> None:
    path = make_path(four)
    for s in four:
        s.healthy = False
    with pytest.raises(NoReplica) as raised:
        path.decide(query(chain(1)), NOW)
    assert not isinstance(raised.value, UnservedModel)  # registered but down: 503, not 404


def test_hooks_keep_in_flight_counts(four: list[ReplicaState]) -> None:
    path = make_path(four)
    q = query(chain(1), tokens=700)
    d = path.decide(q, NOW)
    path.on_dispatch(d, q, NOW)
    s = path.replica(d.replica_id)
    assert s is not None
    assert (s.in_flight, s.in_flight_prefill_tokens) == (1, 700)
    path.on_first_token(d.replica_id, q, NOW)
    assert (s.in_flight, s.in_flight_prefill_tokens) == (1, 0)
    path.on_complete(d.replica_id, q, NOW, ok=True)
    path.on_complete(d.replica_id, q, NOW, ok=True)  # a second completion changes nothing
    assert (s.in_flight, s.in_flight_prefill_tokens) == (0, 0)


def test_failure_before_first_token_releases_the_prompt(four: list[ReplicaState]) -> None:
    path = make_path(four)
    q = query(chain(1), tokens=300)
    d = path.decide(q, NOW)
    path.on_dispatch(d, q, NOW)
    path.on_complete(d.replica_id, q, NOW, ok=False)
    s = path.replica(d.replica_id)
    assert s is not None and (s.in_flight, s.in_flight_prefill_tokens) == (0, 0)
