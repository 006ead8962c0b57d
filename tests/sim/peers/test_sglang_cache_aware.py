import pytest

from placement.domain.prefix import chain_block_ids
from placement.errors import InputError
from sim.peers import PolicyContext, SglangConfig, make_policy
from sim.peers.sglang_cache_aware import is_imbalanced

BLOCK = 256


def sglang():
    return make_policy("sglang_cache_aware", PolicyContext(seed=0, block_tokens=BLOCK))


def request(make_request, blocks):
    return make_request(len(blocks) * BLOCK, hashes=chain_block_ids(blocks), block_tokens=BLOCK)


def warm(policy, views, make_request, replica, blocks):
    """Make the router send a request with ``blocks`` to ``replica`` (only it eligible)."""
    for v in views:
        v.healthy = v.index == replica
    assert policy.route(request(make_request, blocks), views, 0.0) == replica
    for v in views:
        v.healthy = True


@pytest.mark.parametrize(
    ("loads", "expected"),
    [
        ([0, 65], True),  # spread 65 > 64 and 65 > 1.5 * 0
        ([0, 64], False),  # spread not above 64
        ([100, 165], True),  # 65 > 64 and 165 > 150
        ([140, 205], False),  # 65 > 64 but 205 <= 1.5 * 140 = 210
        ([10, 20], False),  # ratio 2 but spread only 10
    ],
)
def test_imbalance_needs_both_thresholds(loads, expected):
    assert is_imbalanced(loads, 64, 1.5) is expected


def test_balanced_and_good_match_goes_to_the_matching_worker(make_views, make_request):
    views = make_views(3)
    policy = sglang()
    warm(policy, views, make_request, 2, [1, 2, 3, 4])
    views[2].outstanding = 30  # busier, but not imbalanced (spread 30 <= 64)
    # 2 of 5 blocks cached: match rate 0.4 > 0.3
    assert policy.route(request(make_request, [1, 2, 9, 9, 9]), views, 0.0) == 2


def test_balanced_and_poor_match_goes_to_the_smallest_tree(make_views, make_request):
    views = make_views(3)
    policy = sglang()
    warm(policy, views, make_request, 0, [1, 2, 3, 4, 5, 6])
    warm(policy, views, make_request, 1, [7, 8])
    warm(policy, views, make_request, 2, [10, 11, 12])
    # 1 of 4 blocks matches on replica 0: rate 0.25 <= 0.3 -> emptiest tree is replica 1
    assert policy.route(request(make_request, [1, 20, 21, 22]), views, 0.0) == 1


def test_imbalanced_goes_to_the_shortest_queue_despite_a_full_match(make_views, make_request):
    views = make_views(3)
    policy = sglang()
    warm(policy, views, make_request, 0, [1, 2, 3, 4])
    for v, load in zip(views, [100, 30, 20], strict=True):
        v.outstanding = load  # spread 80 > 64 and 100 > 1.5 * 20
    assert policy.route(request(make_request, [1, 2, 3, 4]), views, 0.0) == 2


def test_large_spread_within_ratio_still_follows_the_cache(make_views, make_request):
    views = make_views(2)
    policy = sglang()
    warm(policy, views, make_request, 0, [1, 2, 3, 4])
    views[0].outstanding, views[1].outstanding = 206, 140  # spread 66 but 206 <= 1.5 * 140
    assert policy.route(request(make_request, [1, 2, 3, 4]), views, 0.0) == 0


def test_routed_requests_grow_the_chosen_workers_tree(make_views, make_request):
    views = make_views(2)
    policy = sglang()
    first = policy.route(request(make_request, [5, 6, 7]), views, 0.0)
    # the same prompt again follows the first one (full match)
    assert all(
        policy.route(request(make_request, [5, 6, 7]), views, 0.0) == first for _ in range(5)
    )


@pytest.mark.parametrize(
    "field",
    [{"cache_threshold": 1.5}, {"balance_abs_threshold": -1}, {"balance_rel_threshold": 0.5}],
)
def test_bad_settings_are_input_errors(field):
    with pytest.raises(InputError, match="sglang"):
        SglangConfig(**field)
