import pytest

from placement.errors import InputError
from sim.peers import PEER_POLICIES, PolicyContext, make_policy
from sim.router import RoutingPolicy

PUBLISHED = {
    "round_robin",
    "random",
    "least_outstanding",
    "power_of_two",
    "chbl",
    "sglang_cache_aware",
    "llm_d",
    "dynamo",
    "preble_e2",
    "gie_lora",
}


def test_registry_holds_the_ten_peer_policies():
    assert set(PEER_POLICIES) == PUBLISHED


def test_unknown_name_is_an_input_error_listing_valid_names():
    with pytest.raises(InputError) as err:
        make_policy("least_loaded", PolicyContext(seed=0))
    message = str(err.value)
    assert "least_loaded" in message
    assert all(name in message for name in PUBLISHED)


def test_bad_block_size_is_an_input_error():
    with pytest.raises(InputError, match="block_tokens"):
        PolicyContext(seed=0, block_tokens=0)


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_each_policy_instance_is_a_routing_policy_named_as_registered(name):
    policy = make_policy(name, PolicyContext(seed=0))
    assert isinstance(policy, RoutingPolicy)
    assert policy.name == name


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_routes_10k_random_requests_only_to_healthy_matching_replicas(name, route_random):
    route_random(make_policy(name, PolicyContext(seed=1, block_tokens=512)))
