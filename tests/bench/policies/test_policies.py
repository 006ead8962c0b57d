"""The benchmarks' registry: every peer and the service's own route path, by name."""

import pytest

from bench.policies import OURS, POLICIES, GateSettings, PlacementSettings, make_policy
from placement.errors import InputError
from sim.peers import PEER_POLICIES, PolicyContext
from sim.router import RoutingPolicy


def test_registry_is_the_peers_and_ours():
    assert set(POLICIES) == set(PEER_POLICIES) | {OURS}
    assert OURS == "placement"


def test_unknown_name_lists_ours_too():
    with pytest.raises(InputError) as err:
        make_policy("least_loaded", PolicyContext(seed=0))
    assert OURS in str(err.value)


def test_ours_is_a_routing_policy_named_placement():
    policy = make_policy(OURS, PolicyContext(seed=0))
    assert isinstance(policy, RoutingPolicy)
    assert policy.name == OURS


def test_settings_of_the_wrong_type_name_the_field():
    with pytest.raises(InputError, match=r"settings\.placement"):
        make_policy(OURS, PolicyContext(seed=0, settings={OURS: {"plan": None}}))


def test_plan_policy_has_no_gate_and_no_plan_when_given_none():
    policy = make_policy(OURS, PolicyContext(seed=0, settings={OURS: PlacementSettings()}))
    assert policy.gate is None


def test_ours_routes_10k_random_requests_only_to_healthy_matching_replicas(route_random):
    route_random(make_policy(OURS, PolicyContext(seed=1, block_tokens=512)))


def test_ours_reads_each_replicas_tp_and_judges_a_70b_on_4_gpus_by_its_own_tables():
    from placement.domain.fleet import load_fleet
    from placement.domain.requests import Request
    from placement.paths import repo_root
    from sim.gateway import Gateway

    fleet = load_fleet(repo_root() / "data" / "fleets" / "multimodel.yaml")
    policy = make_policy(
        OURS, PolicyContext(seed=0, settings={OURS: PlacementSettings(slo_gate=GateSettings())})
    )
    gateway = Gateway(fleet.replicas, policy)
    assert [v.tp for v in gateway.views] == [r.tp for r in fleet.replicas]
    assert {v.tp for v in gateway.views if v.model == "llama-3-70b"} == {4}
    # a chat turn on a 70B replica behind a modest queue: its full-chunk step on 4×H100
    # (~175 ms) is within reach, on one H100 (~440 ms, the old TP-1 table) a certain miss
    big = next(v for v in gateway.views if v.model == "llama-3-70b")
    big.outstanding_prefill_tokens = big.outstanding = 0
    req = Request(1, 0.0, 1000, 400, model="llama-3-70b")
    idx = policy.route(req, gateway.views, 0.0)
    assert idx >= 0
    assert policy.path.replica(gateway.views[idx].id).tp == 4
    assert policy.gate is not None and policy.gate.last.forecast is not None
    assert policy.gate.last.forecast.full_step_s < 0.25
