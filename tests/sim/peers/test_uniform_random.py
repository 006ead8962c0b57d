from collections import Counter

from sim.peers import PolicyContext, make_policy


def test_same_seed_same_choices_and_all_eligible_used(make_views, make_request):
    views = make_views(4, healthy=[True, False, True, True])
    runs = []
    for _ in range(2):
        policy = make_policy("random", PolicyContext(seed=5))
        runs.append([policy.route(make_request(), views, 0.0) for _ in range(400)])
    assert runs[0] == runs[1]
    counts = Counter(runs[0])
    assert set(counts) == {0, 2, 3}
    assert min(counts.values()) > 90  # 133 expected each


def test_different_seeds_differ(make_views, make_request):
    views = make_views(8)
    a = make_policy("random", PolicyContext(seed=1))
    b = make_policy("random", PolicyContext(seed=2))
    seq_a = [a.route(make_request(), views, 0.0) for _ in range(50)]
    seq_b = [b.route(make_request(), views, 0.0) for _ in range(50)]
    assert seq_a != seq_b
