"""LoRA adapters on the route path: the plan's residency is honoured; without a plan entry a
warm replica is preferred, and a cold one is loaded only when no replica is warm."""

from __future__ import annotations

import dataclasses
import math

import pytest
from route_builders import NOW, TEST_PROFILE, make_path, plan, query, route, scored_profile, states

from placement.plan import AdapterRoute
from serving.route import ReplicaState, RouteQuery
from serving.route.engine_slots import HORIZON_S

SCORED_PROFILE = scored_profile("queue-scorer")


def _lora_states(n: int) -> list[ReplicaState]:
    return [dataclasses.replace(s, max_loras=2) for s in states(n)]


def _ask(adapter: str, tenant: str = "acme") -> RouteQuery:
    return dataclasses.replace(query(tenant=tenant), adapter=adapter)


def _with_residency(fleet: list[ReplicaState], held: dict[str, tuple[str, ...]]):
    p = plan(fleet)
    replicas = tuple(r.model_copy(update={"adapters": held.get(r.id, ())}) for r in p.replicas)
    routes = tuple(
        AdapterRoute(tenant="acme", model="llama-3-8b", adapter=a, rate_rps=1.0, route=route(rs))
        for a, rs in (("hot", ["r1", "r2"]), ("rare", ["r3"]))
    )
    return p.model_copy(update={"replicas": replicas, "adapter_routes": routes})


def test_the_plan_routes_an_adapter_only_to_the_replicas_that_hold_it():
    fleet = _lora_states(4)
    path = make_path(fleet)
    path.install_plan(_with_residency(fleet, {"r1": ("hot",), "r2": ("hot",), "r3": ("rare",)}))
    chosen = set()
    for _ in range(20):
        q = _ask("hot")
        d = path.decide(q, NOW)
        assert d.reason == "plan"
        chosen.add(d.replica_id)
        path.on_dispatch(d, q, NOW)
    assert chosen == {"r1", "r2"}
    assert path.decide(_ask("rare"), NOW).replica_id == "r3"


def test_without_an_entry_the_replica_the_plan_keeps_the_adapter_on_is_taken():
    fleet = _lora_states(4)
    path = make_path(fleet)
    path.install_plan(_with_residency(fleet, {"r3": ("hot", "other")}))
    # tenant "beta" has no adapter route: the unseen-prefix fallback's hash ring would spread
    # its requests, and so would the no-prefix one's load scores (a prompt shorter than a
    # block); the replica holding the adapter takes them all
    for hashes, reason in (((7, 8), "fallback:unseen-prefix"), ((), "fallback:no-prefix")):
        for tenant in ("beta", "gamma", "delta", "epsilon", "zeta"):
            q = dataclasses.replace(_ask("other", tenant=tenant), block_hashes=hashes)
            d = path.decide(q, NOW)
            assert d.reason == reason and d.replica_id == "r3"


def test_no_plan_falls_back_to_where_the_adapter_was_sent_and_loads_only_when_none_is_warm():
    fleet = _lora_states(3)
    path = make_path(fleet)
    q = _ask("a")
    first = path.decide(q, NOW)
    path.on_dispatch(first, q, NOW)
    fleet[fleet.index(path.replica(first.replica_id))].in_flight = 3  # busier than the rest
    again = path.decide(_ask("a"), NOW)
    assert again.replica_id == first.replica_id  # warm beats idle-but-cold
    cold = path.decide(_ask("b"), NOW)
    assert cold.replica_id != first.replica_id  # no replica warm for b: least loaded loads it
    # "a" finishes; two more adapters through the same replica push it out of its two slots
    path.on_complete(first.replica_id, q, NOW, ok=True)
    for name in ("c", "d"):
        path.on_dispatch(first, _ask(name), NOW)
    assert path.decide(_ask("a"), NOW).replica_id != first.replica_id


def test_a_new_adapter_avoids_replicas_whose_slots_are_all_in_use():
    fleet = _lora_states(2)
    path = make_path(fleet)
    for name in ("x", "y"):  # r0's two slots both have requests in flight
        q = _ask(name)
        path.on_dispatch(dataclasses.replace(path.decide(q, NOW), replica_id="r0"), q, NOW)
    fleet[1].in_flight = 10  # r1 far busier, but it has a free slot
    assert path.decide(_ask("z"), NOW).replica_id == "r1"


@pytest.mark.parametrize("profile", [TEST_PROFILE, SCORED_PROFILE], ids=["weighted", "scored"])
def test_an_adapter_planned_over_several_replicas_stays_where_it_is_live(profile: str):
    # "rare" swaps over r2 and r3 (the plan pins it on neither): once sent to one, it stays
    # there while that one is busier, rather than loading on the other too
    fleet = _lora_states(4)
    path = make_path(fleet, profile)
    p = _with_residency(fleet, {"r1": ("hot",)})
    swap = AdapterRoute(
        tenant="acme", model="llama-3-8b", adapter="rare", rate_rps=1.0, route=route(["r2", "r3"])
    )
    others = tuple(a for a in p.adapter_routes if a.adapter != "rare")
    path.install_plan(p.model_copy(update={"adapter_routes": (*others, swap)}))
    q = _ask("rare")
    first = path.decide(q, NOW)
    assert first.replica_id in {"r2", "r3"}
    path.on_dispatch(first, q, NOW)
    fleet[fleet.index(path.replica(first.replica_id))].in_flight = 5  # busier than the other
    for _ in range(5):
        again = path.decide(_ask("rare"), NOW)
        assert again.reason == "plan" and again.replica_id == first.replica_id


def test_the_route_path_books_requests_waiting_for_a_slot_and_their_wait() -> None:
    from serving.route.plugins.base import queued_ahead_tokens, queued_prefill_tokens

    fleet = _lora_states(1)  # two slots
    path = make_path(fleet)
    running = []
    for name in ("a", "b"):
        q = _ask(name)
        d = path.decide(q, NOW)
        path.on_dispatch(d, q, NOW)
        path.on_first_token(d.replica_id, q, NOW)
        running.append((d, q))
    waiting = dataclasses.replace(_ask("c"), input_tokens=3000)
    d = path.decide(waiting, NOW)
    path.on_dispatch(d, waiting, NOW)
    state = fleet[0]
    assert (state.slot_waiting_requests, state.slot_waiting_tokens) == (1, 3000)
    # since when, and whose: what the gate's slot turns read
    assert (state.slot_starved_since, state.slot_starved_tenants) == (NOW, (waiting.tenant,))
    # the scheduler lets a new request pass it: the gate's queue leaves it out
    assert queued_prefill_tokens(state) == 3000 and queued_ahead_tokens(state) == 0
    # slots turn over (short requests of other adapters come and go through one slot)
    a, qa = running[0]
    path.on_complete(a.replica_id, qa, NOW, ok=True)  # a's slot goes to c
    assert state.slot_waiting_requests == 0
    assert (state.slot_starved_since, state.slot_starved_tenants) == (float("inf"), ())
    c_first = path._open[id(waiting)]
    path.on_first_token(c_first[0], waiting, NOW)
    for k in range(4):
        q = _ask(f"short{k}")
        path.on_dispatch(path.decide(q, NOW), q, NOW)
        path.on_first_token("r0", q, NOW)
        path.on_complete("r0", q, NOW + k + 1, ok=True)
        if k == 0:
            path.on_complete("r0", waiting, NOW + 0.5, ok=True)
    assert path.decide(_ask("b"), NOW + 4).slot_wait_s == 0.0  # b holds its slot
    assert path.decide(_ask("d"), NOW + 4).slot_wait_s == 0.0  # a slot is free
    held = _ask("e")
    path.on_dispatch(path.decide(held, NOW + 4), held, NOW + 4)
    path.on_first_token("r0", held, NOW + 4)
    behind = path.decide(_ask("d"), NOW + 4)
    assert behind.slot_wait_s > 0.0  # b and e hold both slots
    assert behind.slot_handovers == 1  # d is first in line for one of them
    assert path.decide(_ask("b"), NOW + 4).slot_handovers == 0


@pytest.mark.parametrize("censored", [False, True])
def test_with_the_censored_rate_a_replica_whose_slots_never_freed_forecasts_a_wait(
    censored: bool,
) -> None:
    fleet = _lora_states(1)  # two slots
    path = make_path(
        fleet, TEST_PROFILE + f"lora_slots: {{censored_rate: {str(censored).lower()}}}\n"
    )
    for name in ("a", "b"):  # both slots held from NOW, never freed
        q = _ask(name)
        path.on_dispatch(path.decide(q, NOW), q, NOW)
        path.on_first_token("r0", q, NOW)
    waits = path.decide(_ask("c"), NOW + 10)
    assert waits.slot_handovers == 1
    # no free in the 10 s the book has watched: about 10 s for one (else unknown, none)
    assert waits.slot_wait_s == (pytest.approx(10.0) if censored else 0.0)


@pytest.mark.parametrize("engine", [False, True])
def test_with_the_engine_wait_the_slot_wait_is_read_from_the_engines_scraped_adapter_lists(
    engine: bool,
) -> None:
    fleet = _lora_states(1)  # two slots
    path = make_path(fleet, TEST_PROFILE + f"lora_slots: {{engine_wait: {str(engine).lower()}}}\n")
    for name in ("a", "b"):  # the book: both slots held, never freed (no rate: no wait)
        q = _ask(name)
        path.on_dispatch(path.decide(q, NOW), q, NOW)
        path.on_first_token("r0", q, NOW)
    state = fleet[0]
    # the engine lists c waiting behind a and b from NOW on, and never hands it a slot
    for k in range(5):
        state.running_lora_adapters, state.waiting_lora_adapters = ("a", "b"), ("c",)
        state.scraped_at = NOW + 2.0 * k
        path.scraped(state)
    behind = path.decide(_ask("d"), NOW + 8.0)
    assert behind.slot_handovers == (2 if engine else 1)  # the engine's line has c ahead
    # no handover in the 8 s c has waited (decayed): the next and d's own at one per ~8 s
    waited = sum(2.0 * math.exp(-2.0 * j / HORIZON_S) for j in range(4))
    assert behind.slot_wait_s == (pytest.approx(2.0 * waited) if engine else 0.0)
    assert path.decide(_ask("a"), NOW + 8.0).slot_wait_s == 0.0  # a runs: no handover
    state.running_lora_adapters = None  # an engine that does not export the lists: the book's
    assert path.decide(_ask("d"), NOW + 8.0).slot_handovers == 1
