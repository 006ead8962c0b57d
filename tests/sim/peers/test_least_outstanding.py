import pytest

from sim.peers import PolicyContext, make_policy


@pytest.mark.parametrize(
    ("outstanding", "healthy", "expected"),
    [
        ([3, 1, 2], None, {1}),
        ([0, 5, 0], None, {0, 2}),  # a tie: either of the least loaded
        ([0, 5, 1], [False, True, True], {2}),  # the least loaded is down
        ([7, 7, 7], None, {0, 1, 2}),
    ],
)
def test_routes_to_the_fewest_outstanding(make_views, make_request, outstanding, healthy, expected):
    views = make_views(3, outstanding=outstanding, healthy=healthy)
    policy = make_policy("least_outstanding", PolicyContext(seed=0))
    picks = {policy.route(make_request(), views, 0.0) for _ in range(50)}
    assert picks == expected
