import random

import pytest

from placement.domain.prefix import chain_block_ids
from placement.errors import InputError
from sim.peers import PolicyContext, PrebleConfig, make_policy

BLOCK = 256


def preble(**config):
    return make_policy(
        "preble_e2",
        PolicyContext(seed=0, block_tokens=BLOCK, settings={"preble_e2": PrebleConfig(**config)}),
    )


def request(make_request, blocks, arrival_s=0.0, output_tokens=64):
    return make_request(
        len(blocks) * BLOCK,
        hashes=chain_block_ids(blocks),
        block_tokens=BLOCK,
        arrival_s=arrival_s,
        output_tokens=output_tokens,
    )


def send(policy, views, req, replica, now=0.0):
    for v in views:
        v.healthy = v.index == replica
    assert policy.route(req, views, now) == replica
    for v in views:
        v.healthy = True


def test_exploits_a_dominant_cached_prefix_even_on_a_loaded_replica(make_views, make_request):
    views = make_views(3)
    policy = preble()
    send(policy, views, request(make_request, [1, 2, 3, 4]), 1)
    for i in range(5):  # pile more work on replica 1
        send(policy, views, request(make_request, [50 + i] * 8), 1)
    probe = request(make_request, [1, 2, 3, 4, 9])  # 1024 cached > 256 left to prefill
    assert policy.route(probe, views, 0.0) == 1
    assert policy.picker.last_branch == "exploit"


def test_exploit_breaks_ties_by_the_lighter_load(make_views, make_request):
    views = make_views(3)
    policy = preble()
    send(policy, views, request(make_request, [1, 2, 3, 4]), 0)
    send(policy, views, request(make_request, [1, 2, 3, 4]), 2)
    send(policy, views, request(make_request, [60] * 4), 0)  # replica 0 is busier
    assert policy.route(request(make_request, [1, 2, 3, 4, 9]), views, 0.0) == 2


def test_explores_by_load_plus_prefill_when_the_match_is_short(make_views, make_request):
    views = make_views(3)
    policy = preble(decode_token_cost=5.0, default_output_tokens=256)
    send(policy, views, request(make_request, [1, 2]), 0)  # L0 = 512 + 5 * 256 = 1792
    send(policy, views, request(make_request, [70]), 1)  # L1 = 256 + 5 * 256 = 1536
    # probe: 6 blocks, 2 cached on r0 (512 < 1024 missed) -> explore
    #   r0: 1792 + 1024 = 2816; r1: 1536 + 1536 = 3072; r2: 0 + 1536 = 1536
    assert policy.route(request(make_request, [1, 2, 9, 9, 9, 9]), views, 0.0) == 2
    assert policy.picker.last_branch == "explore"


def test_explore_weighs_load_against_cached_prefill(make_views, make_request):
    views = make_views(2)
    policy = preble(decode_token_cost=0.0)
    send(policy, views, request(make_request, [1, 2]), 0)  # L0 = 512
    send(policy, views, request(make_request, [80] * 4), 1)  # L1 = 1024
    # probe 6 blocks, 2 cached on r0: r0 512 + 1024 = 1536 < r1 1024 + 1536 = 2560
    assert policy.route(request(make_request, [1, 2, 9, 9, 9, 9]), views, 0.0) == 0


def test_load_only_counts_the_window_and_learns_output_lengths(make_views, make_request):
    views = make_views(2)
    policy = preble(window_s=10.0, decode_token_cost=1.0, default_output_tokens=100)
    old = request(make_request, [1], output_tokens=40)
    send(policy, views, old, 0, now=0.0)
    picker = policy.picker
    assert picker.load(views[0], 1.0) == 256 + 100  # output unknown: the default
    old.first_token_s = 0.5
    policy.on_complete(old, views[0], 2.0)
    assert picker.load(views[0], 2.0) == 256 + 40
    assert picker.load(views[0], 11.0) == 0.0  # routed more than 10 s ago


def test_eviction_cost_prices_recent_hits_of_the_lru_victims(make_views, make_request):
    views = make_views(2, kv_capacity_tokens=4 * BLOCK)  # room for 4 blocks
    policy = preble(window_s=100.0)
    for t in (0.0, 1.0, 2.0):  # the hot chain fills replica 0, 3 hits per block
        send(policy, views, request(make_request, [1, 2, 3, 4], arrival_s=t), 0, now=t)
    picker = policy.picker
    assert picker.eviction_cost(views[0], 4 * BLOCK, 3.0) == 256 * 12  # all 4 blocks evicted
    assert picker.eviction_cost(views[0], 2 * BLOCK, 3.0) == 256 * 6  # the 2 deepest
    assert picker.eviction_cost(views[1], 4 * BLOCK, 3.0) == 0.0  # nothing cached there
    assert picker.eviction_cost(views[0], 4 * BLOCK, 200.0) == 0.0  # hits out of the window


def test_explore_avoids_evicting_a_hot_prefix(make_views, make_request):
    views = make_views(2, kv_capacity_tokens=4 * BLOCK)
    policy = preble(window_s=100.0, decode_token_cost=0.0)
    for t in (0.0, 1.0, 2.0):
        send(policy, views, request(make_request, [1, 2, 3, 4], arrival_s=t), 0, now=t)
    # replica 1 carries more load (2 x 4 blocks = 2048 prompt tokens) but its cache is only
    # hit once per block: r0 1024 + 3 hits x 1024 + 1024 = 5120 > r1 2048 + 1024 + 1024 = 4096
    for t, b in ((1.0, 10), (2.0, 20)):
        send(policy, views, request(make_request, [b, b + 1, b + 2, b + 3], arrival_s=t), 1, now=t)
    assert policy.route(request(make_request, [90] * 4, arrival_s=3.0), views, 3.0) == 1


def test_bad_settings_are_input_errors():
    with pytest.raises(InputError, match=r"preble\.window_s"):
        PrebleConfig(window_s=0.0)


def explore_total(picker, replica, new_tokens, now):
    """(L + M + P) / weight by the definition, for the brute-force argmin."""
    work = picker.load(replica, now) + new_tokens + picker.eviction_cost(replica, new_tokens, now)
    return (work / replica.weight, replica.index)


@pytest.mark.parametrize("seed", range(5))
def test_explore_shortcut_equals_the_full_argmin(make_views, make_request, seed):
    rng = random.Random(seed)
    views = make_views(12, kv_capacity_tokens=16 * BLOCK, weights=[1.0, 2.0, 0.5] * 4)
    policy = preble(window_s=50.0)
    picker = policy.picker
    for t in range(300):
        now = t / 10
        blocks = [rng.randrange(4)] + [rng.randrange(50) for _ in range(rng.randrange(1, 8))]
        policy.route(request(make_request, blocks, arrival_s=now), views, now)
        probe = request(make_request, [rng.randrange(60)] * 3, arrival_s=now)
        n = probe.input_tokens  # priced as fully uncached everywhere, in both computations
        expected = min(views, key=lambda v: explore_total(picker, v, n, now))
        assert picker._explore(probe, views, {v.index: 0 for v in views}, now) is expected
