"""The benchmarks' registry: every peer and the service's own route path, by name."""

import pytest

from bench.policies import OURS, POLICIES, PlacementSettings, make_policy
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
