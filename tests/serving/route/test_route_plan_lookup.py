"""The plan as a lookup: deepest group, default, weights, atomic swaps, batches."""

from __future__ import annotations

import threading
from collections import Counter

import pytest
from route_builders import NOW, chain, group, make_path, plan, query, route, scored_profile, states

from placement.plan import DefaultRoute
from serving.route import Decision, NoReplica, ReplicaState, UnservedModel


def test_deepest_group_wins(four: list[ReplicaState]) -> None:
    c = chain(1, 2, 3, 4)
    p = plan(four, groups=[group(c[:1], route(["r0"])), group(c[:3], route(["r1"]))])
    path = make_path(four)
    path.install_plan(p)
    d = path.decide(query(c), NOW)
    assert (d.replica_id, d.reason, d.plan_version) == ("r1", "plan", 1)
    assert path.decide(query(c[:2]), NOW).replica_id == "r0"


def test_group_of_another_model_is_skipped() -> None:
    fleet = states(2) + states(2, model="qwen2.5-32b", prefix="q")
    c = chain(1, 2)
    p = plan(
        fleet,
        groups=[group(c[:1], route(["r0"])), group(c, route(["q0"]), model="qwen2.5-32b")],
    )
    path = make_path(fleet)
    path.install_plan(p)
    assert path.decide(query(c), NOW).replica_id == "r0"


def test_default_when_no_group_matches(four: list[ReplicaState]) -> None:
    p = plan(
        four,
        groups=[group(chain(9), route(["r0"]))],
        defaults=[DefaultRoute(tenant="acme", model="llama-3-8b", route=route(["r3"]))],
    )
    path = make_path(four)
    path.install_plan(p)
    d = path.decide(query(chain(1, 2)), NOW)
    assert (d.replica_id, d.reason) == ("r3", "plan")


def test_weights_are_respected() -> None:
    fleet = states(3)
    weights = [0.6, 0.3, 0.1]
    c = chain(7)
    path = make_path(fleet)
    path.install_plan(plan(fleet, groups=[group(c, route(["r0", "r1", "r2"], weights))]))
    n = 5000
    counts = Counter(path.decide(query(c), NOW).replica_id for _ in range(n))
    for rid, w in zip(["r0", "r1", "r2"], weights, strict=True):
        assert counts[rid] / n == pytest.approx(w, abs=0.01)


def test_unserved_model_when_no_replica_serves_the_model(four: list[ReplicaState]) -> None:
    path = make_path(four)
    path.install_plan(plan(four))
    # a NoReplica still (callers that only care that nothing can serve), told apart for a 404
    with pytest.raises(UnservedModel, match="qwen"):
        path.decide(query(chain(1), model="qwen2.5-32b"), NOW)
    with pytest.raises(NoReplica):
        path.fastest(query(chain(1), model="qwen2.5-32b"), NOW)


def test_batch_equals_singles(four: list[ReplicaState]) -> None:
    c = chain(1, 2, 3)
    p = plan(
        four,
        groups=[group(c[:2], route(["r0", "r1"], [0.5, 0.5]))],
        defaults=[DefaultRoute(tenant="acme", model="llama-3-8b", route=route(["r2", "r3"]))],
    )
    queries = [
        query(c),
        query(chain(5)),
        query(c[:2]),
        query(model="other"),
        query(chain(8), tenant="x"),
    ]
    queries = queries * 7
    singles_path = make_path(states(4))
    batch_path = make_path(states(4))
    singles_path.install_plan(p)
    batch_path.install_plan(p)
    singles: list[Decision | str] = []
    for q in queries:
        try:
            singles.append(singles_path.decide(q, NOW))
        except NoReplica as exc:
            singles.append(str(exc))
    batch = [
        d if isinstance(d, Decision) else str(d) for d in batch_path.decide_batch(queries, NOW)
    ]
    assert batch == singles


def test_plan_swap_is_atomic() -> None:
    """Every decision names the replica of the plan whose version it carries, while plans are
    swapped underneath from another thread."""
    fleet = states(2)
    c = chain(1)
    plans = {
        v: plan(fleet, groups=[group(c, route([f"r{v % 2}"]))], version=v) for v in range(1, 41)
    }
    path = make_path(fleet)
    path.install_plan(plans[1])
    stop = threading.Event()

    def swap() -> None:
        v = 1
        while not stop.is_set():
            v = v % 40 + 1
            path.install_plan(plans[v])

    t = threading.Thread(target=swap)
    t.start()
    decisions = []
    try:
        # decide until swaps were seen (the swapper may not get the GIL for a while on a busy
        # machine), at most 200k times
        while len(decisions) < 200_000 and (
            len(decisions) < 3000 or len({d.plan_version for d in decisions[-3000:]}) < 2
        ):
            decisions.extend(path.decide(query(c), NOW) for _ in range(1000))
    finally:
        stop.set()
        t.join()
    versions = {d.plan_version for d in decisions}
    assert len(versions) > 1
    for d in decisions:
        assert d.plan_version is not None
        assert d.replica_id == f"r{d.plan_version % 2}"


def test_replicas_the_fleet_lacks_are_dropped(four: list[ReplicaState]) -> None:
    c = chain(3)
    p = plan(four, groups=[group(c, route(["r0", "r1"], [0.5, 0.5]))])
    path = make_path(four[1:])
    path.install_plan(p)
    assert {path.decide(query(c), NOW).replica_id for _ in range(20)} == {"r1"}


SCORED_PROFILE = scored_profile("prefix-match-scorer", "queue-scorer")


def test_scored_plan_picker_follows_load_within_the_plan(four: list[ReplicaState]) -> None:
    c = chain(1, 2)
    p = plan(four, groups=[group(c, route(["r0", "r1"], [0.9, 0.1]), warm=["r0", "r1"])])
    weighted, scored = make_path(four), make_path(four, SCORED_PROFILE)
    weighted.install_plan(p)
    scored.install_plan(p)
    # the plan credits its replicas with the group's prefix: an idle fleet goes to them
    first = scored.decide(query(c), NOW)
    assert first.reason == "plan" and first.replica_id in {"r0", "r1"}
    # r0 and r1 swamped: scored moves to an idle replica, the weighted lookup does not
    for s in four[:2]:
        s.in_flight = 50
        s.num_requests_waiting = 50
    assert scored.decide(query(c), NOW).replica_id in {"r2", "r3"}
    assert weighted.decide(query(c), NOW).replica_id in {"r0", "r1"}


def test_scored_credits_the_prefix_only_where_the_plan_keeps_it_warm(
    four: list[ReplicaState],
) -> None:
    c = chain(1, 2)
    # r0 carries most of the group's traffic but the plan keeps the prefix warm on r2 only
    # (r0's KV budget went to other groups): an idle fleet sends the request to r2
    p = plan(four, groups=[group(c, route(["r0", "r2"], [0.9, 0.1]), warm=["r2"])])
    path = make_path(four, SCORED_PROFILE)
    path.install_plan(p)
    d = path.decide(query(c), NOW)
    assert (d.replica_id, d.reason) == ("r2", "plan")
    # a group kept warm nowhere credits no replica: the queue decides
    for s in four[:3]:
        s.in_flight = 5
    path.install_plan(plan(four, groups=[group(c, route(["r0", "r2"], [0.9, 0.1]))]))
    assert path.decide(query(c), NOW).replica_id == "r3"


def test_a_planned_warm_prefix_is_counted_cached_only_once_the_router_sent_it_there(
    four: list[ReplicaState],
) -> None:
    c = chain(1, 2)
    prefix = len(c) * 16
    p = plan(four, groups=[group(c, route(["r0", "r2"], [0.9, 0.1]), warm=["r2"])])
    path = make_path(four, SCORED_PROFILE)
    path.install_plan(p)
    q = query(c, tokens=4000)
    # the plan steers the request to r2 (its prefix credited there in the ranking) …
    first = path.decide(q, NOW)
    assert (first.replica_id, first.reason) == ("r2", "plan")
    # … but r2 has not loaded it yet: the decision (its TTFT, the gate's forecast) is cold
    assert first.cached_tokens == 0
    path.on_dispatch(first, q, NOW)
    path.on_complete("r2", q, NOW, ok=True, output_tokens=1)
    again = path.decide(q, NOW)
    assert (again.replica_id, again.cached_tokens) == ("r2", prefix)
    assert again.predicted_ttft_s < first.predicted_ttft_s


def test_a_profile_without_a_prefix_index_keeps_the_plans_word_for_cached_tokens(
    four: list[ReplicaState],
) -> None:
    c = chain(1, 2)
    queue_only = SCORED_PROFILE.replace("  - {name: prefix-match-scorer, weight: 1.0}\n", "")
    path = make_path(four, queue_only)
    path.install_plan(plan(four, groups=[group(c, route(["r2"]), warm=["r2"])]))
    four[0].in_flight = four[1].in_flight = four[3].in_flight = 5
    d = path.decide(query(c), NOW)
    assert (d.replica_id, d.cached_tokens) == ("r2", len(c) * 16)


def test_warm_plan_picker_stays_on_the_warm_replicas(four: list[ReplicaState]) -> None:
    c = chain(1, 2)
    p = plan(four, groups=[group(c, route(["r0", "r1"]), warm=["r1"])])
    scored, warm = (
        make_path(four, SCORED_PROFILE),
        make_path(four, SCORED_PROFILE.replace("plan_picker: scored", "plan_picker: warm")),
    )
    scored.install_plan(p)
    warm.install_plan(p)
    # r1 busy: the scored picker leaves it for an idle replica, the warm picker does not (the
    # other replicas' caches hold the groups packed there)
    four[1].in_flight = 20
    four[1].num_requests_waiting = 20
    assert scored.decide(query(c), NOW).replica_id != "r1"
    d = warm.decide(query(c), NOW)
    assert (d.replica_id, d.reason) == ("r1", "plan")
    # the warm replica down: the picker falls back to the whole fleet
    four[1].healthy = False
    assert warm.decide(query(c), NOW).replica_id in {"r0", "r2", "r3"}


def test_planned_plan_picker_keeps_a_tenant_on_its_planned_replicas(
    four: list[ReplicaState],
) -> None:
    # the plan put the batch tenant on r2 and r3 (the cheap accelerators), spilling to r1
    p = plan(
        four,
        defaults=[
            DefaultRoute(
                tenant="acme", model="llama-3-8b", route=route(["r2", "r3"], secondary=["r1"])
            )
        ],
    )
    scored, planned = (
        make_path(four, SCORED_PROFILE),
        make_path(four, SCORED_PROFILE.replace("plan_picker: scored", "plan_picker: planned")),
    )
    scored.install_plan(p)
    planned.install_plan(p)
    for s in four[2:]:
        s.in_flight = 20
        s.num_requests_waiting = 20
    # both planned replicas busy: the scored picker moves to an idle replica of the fleet, the
    # planned picker picks the less loaded of the two the plan chose
    assert scored.decide(query(), NOW).replica_id in {"r0", "r1"}
    four[3].num_requests_waiting = 30
    d = planned.decide(query(), NOW)
    assert (d.replica_id, d.reason) == ("r2", "plan")
    # both down: the secondary, then the rest of the fleet
    four[2].healthy = four[3].healthy = False
    d = planned.decide(query(), NOW)
    assert (d.replica_id, d.reason) == ("r1", "fallback:spill")
    four[1].healthy = False
    assert planned.decide(query(), NOW).replica_id == "r0"
