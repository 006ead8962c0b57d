from collections import Counter

import pytest

from sim.peers.pickers import MaxScorePicker, RandomPicker


@pytest.mark.parametrize(
    ("scores", "expected"),
    [
        ([0.1, 0.9, 0.5], 1),
        ([2.0, 1.0, 2.0], 0),  # tie: lowest index without a seed
        ([0.0, 0.0, 0.0], 0),
        ([1.0, 3.0 - 1e-12, 3.0], 1),  # within tolerance counts as a tie
    ],
)
def test_max_score_picker_takes_the_highest_score(make_views, make_request, scores, expected):
    views = make_views(3)
    assert MaxScorePicker().pick(make_request(), views, scores, 0.0).index == expected


def test_seeded_max_score_picker_breaks_ties_among_the_tied_only(make_views, make_request):
    views = make_views(4)
    picker = MaxScorePicker(seed=7)
    picks = Counter(
        picker.pick(make_request(), views, [1.0, 0.5, 1.0, 1.0], 0.0).index for _ in range(300)
    )
    assert set(picks) == {0, 2, 3}
    again = MaxScorePicker(seed=7)
    replay = Counter(
        again.pick(make_request(), views, [1.0, 0.5, 1.0, 1.0], 0.0).index for _ in range(300)
    )
    assert replay == picks


def test_random_picker_is_seeded_and_covers_every_candidate(make_views, make_request):
    views = make_views(5)
    p1, p2 = RandomPicker(11), RandomPicker(11)
    seq1 = [p1.pick(make_request(), views, [0.0] * 5, 0.0).index for _ in range(500)]
    seq2 = [p2.pick(make_request(), views, [0.0] * 5, 0.0).index for _ in range(500)]
    assert seq1 == seq2
    counts = Counter(seq1)
    assert set(counts) == {0, 1, 2, 3, 4}
    assert min(counts.values()) > 60  # 100 expected each
