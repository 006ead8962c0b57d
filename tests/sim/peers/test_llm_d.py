import pytest

from placement.domain.prefix import chain_block_ids
from placement.errors import InputError
from sim.peers import LlmdConfig, PolicyContext, make_policy
from sim.peers.llm_d import KvCacheUtilizationScorer, QueueScorer

BLOCK = 256


def request(make_request, blocks):
    return make_request(len(blocks) * BLOCK, hashes=chain_block_ids(blocks), block_tokens=BLOCK)


def warm(policy, views, make_request, replica, blocks):
    for v in views:
        v.healthy = v.index == replica
    assert policy.route(request(make_request, blocks), views, 0.0) == replica
    for v in views:
        v.healthy = True


@pytest.mark.parametrize(
    ("waiting", "expected"),
    [([0, 4, 8], [1.0, 0.5, 0.0]), ([3, 3], [1.0, 1.0]), ([10, 2, 6], [0.0, 1.0, 0.5])],
)
def test_queue_scorer_is_min_max_normalised(make_views, make_request, waiting, expected):
    views = make_views(len(waiting), waiting=waiting)
    assert QueueScorer().score(make_request(), views, 0.0) == pytest.approx(expected)


def test_kv_cache_scorer_is_free_fraction(make_views, make_request):
    views = make_views(4, kv_usage=[0.0, 0.25, 1.0, 1.2])
    scores = KvCacheUtilizationScorer().score(make_request(), views, 0.0)
    assert scores == pytest.approx([1.0, 0.75, 0.0, 0.0])


@pytest.mark.parametrize(
    ("probe", "config", "expected"),
    [
        # queue [1, .5, 0] x2 + kv [.5, .75, .75] x2 + prefix [0, 0, 1] x3 = [3, 2.5, 4.5]
        ([1, 2, 3, 4], LlmdConfig(), 2),
        # prefix [0, 0, .25] x3: totals [3, 2.5, 2.25]
        ([1, 7, 8, 9], LlmdConfig(), 0),
        # prefix weight 0: the full match does not count, totals [3, 2.5, 1.5]
        ([1, 2, 3, 4], LlmdConfig(prefix_weight=0.0), 0),
        # queue weight 0: kv [.5, .75, .75] x2 + prefix x3 = [1, 1.5, 1.5 + .75]
        ([1, 7, 8, 9], LlmdConfig(queue_weight=0.0), 2),
    ],
)
def test_weighted_sum_of_queue_kv_and_prefix(make_views, make_request, probe, config, expected):
    views = make_views(3)
    policy = make_policy(
        "llm_d", PolicyContext(seed=0, block_tokens=BLOCK, settings={"llm_d": config})
    )
    warm(policy, views, make_request, 2, [1, 2, 3, 4])
    for v, q, kv in zip(views, [0, 4, 8], [0.5, 0.25, 0.25], strict=True):
        v.num_waiting, v.kv_usage = q, kv
    assert policy.route(request(make_request, probe), views, 0.0) == expected


def test_prefix_match_is_capped_at_max_prefix_blocks(make_views, make_request):
    views = make_views(2)
    config = LlmdConfig(max_prefix_blocks=2, queue_weight=0.0, kv_cache_weight=0.0)
    policy = make_policy(
        "llm_d", PolicyContext(seed=0, block_tokens=BLOCK, settings={"llm_d": config})
    )
    warm(policy, views, make_request, 1, [1, 2])
    # only the first 2 blocks are looked at: a full match on replica 1 despite the new tail
    scorer = policy.scorers[2][0]
    assert scorer.score(request(make_request, [1, 2, 3, 4]), views, 0.0) == [0.0, 1.0]


def test_bad_settings_are_input_errors():
    with pytest.raises(InputError, match=r"llm_d\.prefix_weight"):
        LlmdConfig(prefix_weight=-1.0)
