"""A retry budget: retries may add at most a share of the traffic, plus a small floor.

As Finagle's and Envoy's retry budgets: every request deposits ``ratio`` of a retry, time
deposits ``min_per_s`` retries a second, the balance is capped, and a retry spends one. When a
replica fails, its requests are retried on the next replica of their decision; when much of the
fleet fails, retries stop at the budget instead of multiplying the load.
"""

from __future__ import annotations

import time
from collections.abc import Callable

CAP_SECONDS = 10.0  # the balance holds at most this many seconds of the floor, or 10 retries


class RetryBudget:
    def __init__(
        self,
        *,
        ratio: float,
        min_per_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.ratio = ratio
        self.min_per_s = min_per_s
        self.cap = max(10.0, min_per_s * CAP_SECONDS)
        self._clock = clock
        self._balance = self.cap
        self._at = clock()
        self.spent = 0
        self.refused = 0

    def _refill(self) -> None:
        now = self._clock()
        self._balance = min(self.cap, self._balance + (now - self._at) * self.min_per_s)
        self._at = now

    def deposit(self) -> None:
        """A request was sent (its first try)."""
        self._balance = min(self.cap, self._balance + self.ratio)

    def try_spend(self) -> bool:
        """May one more retry go out now? (Spends it if so.)"""
        self._refill()
        if self._balance >= 1.0:
            self._balance -= 1.0
            self.spent += 1
            return True
        self.refused += 1
        return False
