"""``power_of_two``: sample two distinct eligible replicas, send to the less loaded one.

The power of two choices (Mitzenmacher): sampling two bins and taking the lighter one cuts the
maximum load from O(log n / log log n) to O(log log n) at the cost of reading two counters.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

from placement.domain.requests import Request
from sim.peers.filters import HealthFilter, ModelFilter
from sim.router import Pipeline, ReplicaView

if TYPE_CHECKING:
    from sim.peers.context import PolicyContext


class PowerOfTwoPicker:
    """Draws two distinct candidates with a seeded RNG; keeps the one with fewer outstanding.

    Ignores scores. On a tie the first drawn wins (itself a random choice).
    """

    name = "power-of-two-picker"

    def __init__(self, seed: int) -> None:
        self._rng = random.Random(seed)

    def pick(
        self, req: Request, candidates: list[ReplicaView], scores: list[float], now: float
    ) -> ReplicaView:
        i, j = self._rng.sample(range(len(candidates)), 2)
        a, b = candidates[i], candidates[j]
        return b if b.outstanding < a.outstanding else a


def build(ctx: PolicyContext) -> Pipeline:
    """Power of two choices on the router's outstanding counter, seeded by ``ctx.seed``."""
    return Pipeline(
        "power_of_two",
        filters=[ModelFilter(), HealthFilter()],
        picker=PowerOfTwoPicker(ctx.seed),
    )
