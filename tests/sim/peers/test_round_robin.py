from sim.peers import PolicyContext, make_policy


def route_many(policy, views, make_request, n, **req_kwargs):
    return [policy.route(make_request(**req_kwargs), views, 0.0) for _ in range(n)]


def test_cycles_through_replicas_in_index_order(make_views, make_request):
    policy = make_policy("round_robin", PolicyContext(seed=0))
    assert route_many(policy, make_views(3), make_request, 7) == [0, 1, 2, 0, 1, 2, 0]


def test_skips_unhealthy_and_other_model_replicas(make_views, make_request):
    views = make_views(5, models=["a", "b", "a", "a", "a"], healthy=[True, True, True, False, True])
    policy = make_policy("round_robin", PolicyContext(seed=0))
    assert route_many(policy, views, make_request, 6, model="a") == [0, 2, 4, 0, 2, 4]


def test_order_survives_a_replica_going_down_and_back(make_views, make_request):
    views = make_views(3)
    policy = make_policy("round_robin", PolicyContext(seed=0))
    assert route_many(policy, views, make_request, 2) == [0, 1]
    views[2].healthy = False
    assert route_many(policy, views, make_request, 2) == [0, 1]
    views[2].healthy = True
    assert route_many(policy, views, make_request, 2) == [2, 0]


def test_refuses_when_nothing_is_eligible(make_views, make_request):
    policy = make_policy("round_robin", PolicyContext(seed=0))
    assert policy.route(make_request(model="x"), make_views(2), 0.0) == -1
