"""``round_robin``: each request to the next eligible replica in index order, cyclically."""

from __future__ import annotations

from bisect import bisect_right
from operator import attrgetter
from typing import TYPE_CHECKING

from placement.domain.requests import Request
from sim.peers.filters import HealthFilter, ModelFilter
from sim.router import Pipeline, ReplicaView

if TYPE_CHECKING:
    from sim.peers.context import PolicyContext


_index = attrgetter("index")


class RoundRobinPicker:
    """Picks the first candidate whose index follows the last replica routed to, wrapping.

    Cycling over replica indices rather than list positions keeps the order fair when the
    filters drop different replicas from one request to the next.
    """

    name = "round-robin-picker"

    def __init__(self) -> None:
        self._last = -1

    def pick(
        self, req: Request, candidates: list[ReplicaView], scores: list[float], now: float
    ) -> ReplicaView:
        # candidates keep the fleet's index order, so the next one is a binary search away
        i = bisect_right(candidates, self._last, key=_index)
        return candidates[i] if i < len(candidates) else candidates[0]

    def on_routed(self, req: Request, replica: ReplicaView, now: float) -> None:
        self._last = replica.index


def build(ctx: PolicyContext) -> Pipeline:
    """The round-robin policy (no parameters)."""
    return Pipeline(
        "round_robin", filters=[ModelFilter(), HealthFilter()], picker=RoundRobinPicker()
    )
