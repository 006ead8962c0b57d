import heapq
import random

import pytest

from placement.errors import InputError
from placement.prefix import chain_block_ids
from placement.routing.base import RoutingPolicy
from placement.routing.policies import PEER_POLICIES, PolicyContext, make_policy

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
    "placement",  # this project's own route path (serving.route), for comparison
}


def test_registry_holds_the_nine_peer_policies_and_placement():
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


def drain(events, views, policy, *, until):
    """Deliver first tokens (kind 0) and completions (kind 1) due by ``until``, as a gateway."""
    while events and events[0][0] <= until:
        t, kind, _, req = heapq.heappop(events)
        v = views[req.replica]
        if kind == 0:
            v.outstanding_prefill_tokens -= req.input_tokens
            v.decoding += 1
            req.first_token_s = t
            policy.on_first_token(req, v, t)
        else:
            v.outstanding -= 1
            v.decoding -= 1
            req.finish_s = t
            policy.on_complete(req, v, t)


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_routes_10k_random_requests_only_to_healthy_matching_replicas(
    name, make_views, make_request
):
    rng = random.Random(42)
    models = ["llama"] * 12 + ["qwen"] * 4
    views = make_views(16, models=models, kv_capacity_tokens=64 * 512)
    policy = make_policy(name, PolicyContext(seed=1, block_tokens=512))
    events: list[tuple[float, int, int, object]] = []  # (time, kind, seq, request)
    now, seq = 0.0, 0
    for i in range(10_000):
        now += rng.expovariate(50.0)
        drain(events, views, policy, until=now)
        if i % 500 == 0:  # health flaps and a metrics scrape; one replica per model stays up
            for v in views:
                v.healthy = v.index in (0, 12) or rng.random() > 0.2
                v.num_waiting = rng.randrange(20)
                v.kv_usage = rng.random()
        group = rng.randrange(30)
        blocks = [group, group % 7] + [rng.randrange(1000) for _ in range(rng.randrange(0, 6))]
        hashes = chain_block_ids(blocks[: rng.randrange(0, len(blocks) + 1)])
        req = make_request(
            rng.randrange(1, 4000),
            hashes=hashes,
            block_tokens=512,
            model=rng.choice(["", "llama", "qwen"]),
            tenant=f"t{rng.randrange(5)}",
            arrival_s=now,
        )
        idx = policy.route(req, views, now)
        assert 0 <= idx < len(views)
        chosen = views[idx]
        assert chosen.healthy
        assert req.model in ("", chosen.model)
        req.replica = idx
        chosen.outstanding += 1
        chosen.outstanding_prefill_tokens += req.input_tokens
        ttft = rng.uniform(0.01, 2.0)
        seq += 1
        heapq.heappush(events, (now + ttft, 0, seq, req))
        seq += 1
        heapq.heappush(events, (now + ttft + rng.uniform(0.1, 20.0), 1, seq, req))
    drain(events, views, policy, until=float("inf"))
    assert all(v.outstanding == 0 and v.decoding == 0 for v in views)
