import math
import random

import pytest

from placement.domain.prefix import chain_block_ids
from placement.errors import InputError
from sim.peers import ChblConfig, PolicyContext, make_policy
from sim.peers.chbl import load_bound


def chbl(epsilon=0.25, key_blocks=2):
    return make_policy(
        "chbl",
        PolicyContext(
            seed=0, settings={"chbl": ChblConfig(epsilon=epsilon, key_blocks=key_blocks)}
        ),
    )


def prefix_request(make_request, group, tail=0):
    # requests of one group share their first two blocks (the key), then differ
    return make_request(2048, hashes=chain_block_ids([group, group, 1000 + tail]))


@pytest.mark.parametrize(
    ("total", "share", "epsilon", "expected"),
    [
        (7, 0.25, 0.25, 3),  # ceil(1.25 * 8 / 4) = ceil(2.5)
        (7, 0.1, 0.25, 1),  # 1.25 * 8 / 10 is 1.0000000000000002 in floats: still 1
        (0, 0.5, 0.25, 1),
        (99, 0.75, 0.1, 83),  # ceil(1.1 * 100 * 0.75) = ceil(82.5)
    ],
)
def test_load_bound(total, share, epsilon, expected):
    assert load_bound(total, share, epsilon) == expected


def test_same_prefix_same_replica_across_instances(make_views, make_request):
    views = make_views(8)
    first = chbl().route(prefix_request(make_request, 1), views, 0.0)
    for tail in range(20):  # different suffixes, same key blocks; fresh and reused instances
        assert chbl().route(prefix_request(make_request, 1, tail), views, 0.0) == first


def test_never_exceeds_the_bound_under_a_hot_prefix(make_views, make_request):
    n, eps = 6, 0.25
    views = make_views(n)
    policy = chbl(epsilon=eps)
    rng = random.Random(1)
    hot_replicas = set()
    for _ in range(600):
        group = 0 if rng.random() < 0.8 else rng.randrange(1, 20)
        total = sum(v.outstanding for v in views)
        bound = math.ceil((1 + eps) * (total + 1) / n - 1e-9)
        idx = policy.route(prefix_request(make_request, group, rng.randrange(99)), views, 0.0)
        views[idx].outstanding += 1
        assert views[idx].outstanding <= bound
        if group == 0:
            hot_replicas.add(idx)
        if rng.random() < 0.4:  # some requests finish
            busy = [v for v in views if v.outstanding > 0]
            rng.choice(busy).outstanding -= 1
    assert len(hot_replicas) > 1  # the bound did bite: the hot prefix spilled


def test_a_full_home_spills_to_one_next_replica(make_views, make_request):
    views = make_views(4)
    policy = chbl(epsilon=0.25)
    home = policy.route(prefix_request(make_request, 3), views, 0.0)
    views[home].outstanding = 10  # total 10: bound ceil(1.25 * 11 / 4) = 4, home is over it
    spills = {policy.route(prefix_request(make_request, 3, t), views, 0.0) for t in range(10)}
    assert len(spills) == 1
    assert home not in spills


def test_a_replica_going_down_moves_only_its_own_keys(make_views, make_request):
    views = make_views(8)
    policy = chbl()
    before = {g: policy.route(prefix_request(make_request, g), views, 0.0) for g in range(200)}
    views[5].healthy = False
    after = {g: policy.route(prefix_request(make_request, g), views, 0.0) for g in range(200)}
    moved = {g for g in before if before[g] != after[g]}
    assert moved == {g for g in before if before[g] == 5}
    assert moved  # 200 keys over 8 replicas: some did live on replica 5


def test_requests_without_hashes_are_keyed_by_tenant(make_views, make_request):
    views = make_views(8)
    policy = chbl()
    picks = {policy.route(make_request(tenant="acme"), views, 0.0) for _ in range(20)}
    assert len(picks) == 1
    spread = {policy.route(make_request(tenant=f"t{i}"), views, 0.0) for i in range(40)}
    assert len(spread) > 3


@pytest.mark.parametrize("field", [{"epsilon": 0.0}, {"key_blocks": 0}, {"virtual_nodes": 0}])
def test_bad_settings_are_input_errors(field):
    with pytest.raises(InputError, match="chbl"):
        ChblConfig(**field)
