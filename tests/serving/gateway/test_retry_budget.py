"""The retry budget: a share of the requests plus a floor per second, capped."""

from __future__ import annotations

from serving.gateway.retry import RetryBudget


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_the_floor_refills_over_time_and_the_balance_is_capped() -> None:
    clock = Clock()
    budget = RetryBudget(ratio=0.0, min_per_s=2.0, clock=clock)
    spent = sum(budget.try_spend() for _ in range(100))
    assert spent == 20  # the cap: 10 s of the floor
    assert not budget.try_spend() and budget.refused >= 1
    clock.now += 1.0
    assert [budget.try_spend() for _ in range(3)] == [True, True, False]
    clock.now += 1000.0
    assert sum(budget.try_spend() for _ in range(100)) == 20


def test_requests_deposit_their_share() -> None:
    clock = Clock()
    budget = RetryBudget(ratio=0.5, min_per_s=0.0, clock=clock)
    while budget.try_spend():  # spend the initial balance
        pass
    for _ in range(4):
        budget.deposit()
    assert [budget.try_spend() for _ in range(3)] == [True, True, False]
