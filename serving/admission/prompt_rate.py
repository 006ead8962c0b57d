"""Prompt tokens per second the gate has sent each replica lately.

A request's prefill is ordered first come, first served; what arrives while it waits for its
first token is prefilled after it — during its decode, in the same iterations. How much that
is depends on the rate at which prompt work reaches the replica, which the router knows
better than anyone: it sent it. The rate is an exponentially decayed sum of the prompt
tokens dispatched, divided by its time constant :data:`RATE_WINDOW_S` (the order of a wait
plus a short decode: long enough to smooth single requests, short enough to follow a burst).
"""

from __future__ import annotations

import math

RATE_WINDOW_S = 10.0


class PromptRates:
    """Per-replica decayed rates of dispatched prompt tokens and requests (per second)."""

    def __init__(self, window_s: float = RATE_WINDOW_S) -> None:
        self.window_s = window_s
        # replica → (decayed prompt tokens, decayed requests, as of)
        self._sums: dict[str, tuple[float, float, float]] = {}

    def add(self, replica_id: str, tokens: int, now: float) -> None:
        total, count, at = self._sums.get(replica_id, (0.0, 0.0, now))
        keep = self._keep(at, now)
        self._sums[replica_id] = (total * keep + tokens, count * keep + 1.0, max(at, now))

    def rate(self, replica_id: str, now: float) -> float:
        """Prompt tokens per second."""
        total, _, at = self._sums.get(replica_id, (0.0, 0.0, now))
        return total * self._keep(at, now) / self.window_s

    def request_rate(self, replica_id: str, now: float) -> float:
        """Requests per second."""
        _, count, at = self._sums.get(replica_id, (0.0, 0.0, now))
        return count * self._keep(at, now) / self.window_s

    def _keep(self, at: float, now: float) -> float:
        return math.exp(-(now - at) / self.window_s) if now > at else 1.0
