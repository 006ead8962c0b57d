import math
from collections import Counter

import pytest

from placement.domain.prefix import chain_block_ids
from placement.errors import InputError
from sim.peers import DynamoConfig, PolicyContext, make_policy

BLOCK = 256


def request(make_request, blocks, arrival_s=0.0):
    return make_request(
        len(blocks) * BLOCK, hashes=chain_block_ids(blocks), block_tokens=BLOCK, arrival_s=arrival_s
    )


def send(policy, views, req, replica, now=0.0):
    for v in views:
        v.healthy = v.index == replica
    assert policy.route(req, views, now) == replica
    for v in views:
        v.healthy = True


def fleet_with_history(make_views, make_request, **config):
    """r0 was sent A = blocks [1,2,3,4], r1 was sent B = [5,6]; both have a first token."""
    views = make_views(3)
    policy = make_policy(
        "dynamo",
        PolicyContext(seed=0, block_tokens=BLOCK, settings={"dynamo": DynamoConfig(**config)}),
    )
    a, b = request(make_request, [1, 2, 3, 4]), request(make_request, [5, 6])
    send(policy, views, a, 0)
    send(policy, views, b, 1)
    policy.on_first_token(a, views[0], 1.0)
    policy.on_first_token(b, views[1], 1.0)
    return policy, views, a


# probe = [1,2,3,9,9,9]: 6 blocks, 3 of them cached on r0
#   r0: prefill 0 + (6 - 3) = 3, decode 4 + 6 = 10
#   r1: prefill 0 + 6 = 6,       decode 2 + 6 = 8
#   r2: prefill 0 + 6 = 6,       decode 0 + 6 = 6
@pytest.mark.parametrize(
    ("scale", "costs", "expected"),
    [(1.0, [13, 14, 12], 2), (2.0, [16, 20, 18], 0), (0.0, [10, 8, 6], 2)],
)
def test_cost_matches_the_published_formula(make_views, make_request, scale, costs, expected):
    policy, views, _ = fleet_with_history(make_views, make_request, prefill_load_scale=scale)
    probe = request(make_request, [1, 2, 3, 9, 9, 9])
    assert policy.picker.costs(probe, views, 0.0) == pytest.approx(costs)
    assert policy.route(probe, views, 0.0) == expected


def test_active_prefill_counts_until_first_token_and_blocks_until_completion(
    make_views, make_request
):
    policy, views, a = fleet_with_history(make_views, make_request)
    c = request(make_request, [1, 2, 7, 8])  # 2 of 4 blocks cached on r0
    send(policy, views, c, 0)
    picker = policy.picker
    assert picker.active_prefill_blocks[0] == 2  # only C's uncached blocks
    assert picker.active_blocks[0] == 8  # A and C's prompts
    policy.on_first_token(c, views[0], 2.0)
    assert picker.active_prefill_blocks[0] == 0
    policy.on_complete(a, views[0], 3.0)
    policy.on_complete(c, views[0], 3.0)
    assert picker.active_blocks[0] == 0


def test_a_failed_request_without_first_token_releases_its_prefill(make_views, make_request):
    policy, views, _ = fleet_with_history(make_views, make_request)
    d = request(make_request, [40, 41, 42])
    send(policy, views, d, 2)
    assert policy.picker.active_prefill_blocks[2] == 3
    policy.on_complete(d, views[2], 1.0)  # connection failed: no first token ever
    assert policy.picker.active_prefill_blocks[2] == 0
    assert policy.picker.active_blocks[2] == 0


def test_overlap_is_forgotten_after_the_ttl(make_views, make_request):
    policy, views, _ = fleet_with_history(make_views, make_request, prefill_load_scale=2.0)
    late = request(make_request, [1, 2, 3, 9, 9, 9], arrival_s=500.0)
    # r0 no longer credited: prefill 6 on all; decode 10, 8, 6
    assert policy.picker.costs(late, views, 500.0) == pytest.approx([22, 20, 18])


def test_temperature_samples_a_softmax_over_normalised_costs(make_views, make_request):
    policy, views, _ = fleet_with_history(make_views, make_request, temperature=1.0)
    probe = request(make_request, [1, 2, 3, 9, 9, 9])
    # costs [13, 14, 12] normalise to [0.5, 1, 0]
    weights = [math.exp(-0.5), math.exp(-1.0), 1.0]
    n = 4000
    picks = Counter(policy.picker.pick(probe, views, [], 0.0).index for _ in range(n))
    for i, w in enumerate(weights):
        assert abs(picks[i] / n - w / sum(weights)) < 0.03


def test_bad_settings_are_input_errors():
    with pytest.raises(InputError, match=r"dynamo\.temperature"):
        DynamoConfig(temperature=-1.0)
