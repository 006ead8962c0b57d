"""The shared scoring formulas against tables: min-max grades and the bounded-load cap."""

from __future__ import annotations

import pytest

from placement.domain.scoring import load_bound, lower_is_better


@pytest.mark.parametrize(
    ("values", "grades"),
    [
        ([1.0, 1.0], [1.0, 1.0]),
        ([0.0, 5.0, 10.0], [1.0, 0.5, 0.0]),
        ([7.0], [1.0]),  # a lone value is the best
        ([10.0, 0.0], [0.0, 1.0]),  # order follows the input, not the grade
        ([2.0, 2.0, 6.0], [1.0, 1.0, 0.0]),  # ties for the least share the top grade
        ([-4.0, 0.0, 4.0], [1.0, 0.5, 0.0]),  # negatives are graded like any value
        ([3, 1, 2], [0.0, 1.0, 0.5]),  # integers too
    ],
)
def test_lower_is_better(values: list[float], grades: list[float]) -> None:
    assert lower_is_better(values) == grades


@pytest.mark.parametrize(
    "values",
    [[0.1, 0.7, 0.3], [1e-9, 2e-9, 5e-9], [1000.0, 1000.5, 999.0, 1200.0]],
)
def test_lower_is_better_spans_zero_to_one(values: list[float]) -> None:
    grades = lower_is_better(values)
    assert all(0.0 <= g <= 1.0 for g in grades)
    assert grades[values.index(min(values))] == 1.0
    assert grades[values.index(max(values))] == 0.0
    # the grade falls as the value rises
    ranked = sorted(range(len(values)), key=values.__getitem__)
    assert [grades[i] for i in ranked] == sorted(grades, reverse=True)


@pytest.mark.parametrize(
    ("total_outstanding", "weight_share", "epsilon", "bound"),
    [
        (0, 1 / 4, 0.25, 1),  # an idle pool: ceil(1.25 · 1 / 4) = 1
        (3, 1 / 4, 0.25, 2),  # ceil(1.25 · 4 / 4) = ceil(1.25)
        (7, 1 / 4, 0.25, 3),  # ceil(1.25 · 8 / 4) = 2.5 → 3
        (79, 1 / 8, 0.25, 13),  # ceil(1.25 · 80 / 8) = ceil(12.5)
        (15, 1 / 4, 0.0, 4),  # ε = 0 is the fair share exactly, no rounding up
        (0, 1.0, 0.25, 2),  # a pool of one: ceil(1.25)
        (9, 1 / 2, 1.0, 10),  # ceil(2 · 10 / 2)
        (7, 1 / 10, 0.25, 1),  # 1.25 · 8 / 10 is exactly 1
        (49, 1 / 2, 1.2, 55),  # 2.2 · 50 / 2 is 55.00000000000001 in floats: still 55
        (89, 1 / 2, 0.4, 63),  # 62.99999999999999 in floats: 63
        (10, 0.3, 0.5, 5),  # a weighted share: ceil(1.5 · 11 · 0.3) = ceil(4.95)
    ],
)
def test_load_bound(
    total_outstanding: int, weight_share: float, epsilon: float, bound: int
) -> None:
    got = load_bound(total_outstanding, weight_share, epsilon)
    assert isinstance(got, int)
    assert got == bound


@pytest.mark.parametrize("n", [1, 2, 3, 8, 13])
@pytest.mark.parametrize("epsilon", [0.1, 0.25, 1.0])
def test_load_bound_admits_the_fair_share(n: int, epsilon: float) -> None:
    # every replica may hold at least its (1 + ε) share of the pool after placement, and the
    # bounds over the pool leave room for the request being placed
    for total in range(0, 50):
        bound = load_bound(total, 1.0 / n, epsilon)
        assert bound >= (1.0 + epsilon) * (total + 1) / n - 1e-9
        assert bound < (1.0 + epsilon) * (total + 1) / n + 1
        assert n * bound >= total + 1
