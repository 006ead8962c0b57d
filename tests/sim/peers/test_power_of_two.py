from collections import Counter

import pytest

from sim.peers import PolicyContext, make_policy


@pytest.mark.parametrize(("outstanding", "expected"), [([5, 1], 1), ([0, 9], 0), ([4, 3], 1)])
def test_with_two_candidates_takes_the_less_loaded(make_views, make_request, outstanding, expected):
    views = make_views(2, outstanding=outstanding)
    policy = make_policy("power_of_two", PolicyContext(seed=3))
    assert {policy.route(make_request(), views, 0.0) for _ in range(30)} == {expected}


def test_picks_the_lighter_of_two_random_replicas(make_views, make_request):
    n = 10
    views = make_views(n, outstanding=list(range(n)))  # replica i holds i requests
    policy = make_policy("power_of_two", PolicyContext(seed=3))
    picks = Counter(policy.route(make_request(), views, 0.0) for _ in range(4000))
    assert n - 1 not in picks  # the most loaded always loses its pair
    # replica i wins when drawn with any of the n-1-i heavier ones: P = 2(n-1-i)/(n(n-1))
    for i in (0, 4):
        expected = 2 * (n - 1 - i) / (n * (n - 1))
        assert abs(picks[i] / 4000 - expected) < 0.03
