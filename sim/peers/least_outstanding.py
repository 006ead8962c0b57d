"""``least_outstanding``: the replica with the fewest requests in flight (router's own count)."""

from __future__ import annotations

from operator import attrgetter
from typing import TYPE_CHECKING

from placement.domain.requests import Request
from placement.domain.scoring import lower_is_better
from sim.peers.filters import HealthFilter, ModelFilter
from sim.peers.pickers import MaxScorePicker
from sim.router import Pipeline, ReplicaView

if TYPE_CHECKING:
    from sim.peers.context import PolicyContext


_outstanding = attrgetter("outstanding")


class LeastOutstandingScorer:
    """Grades ``ReplicaView.outstanding`` (requests sent, not finished): fewer is better.

    Min-max normalised over the candidates; ties (e.g. an idle fleet) all grade 1.
    """

    name = "least-outstanding-scorer"

    def score(self, req: Request, candidates: list[ReplicaView], now: float) -> list[float]:
        return lower_is_better(list(map(_outstanding, candidates)))


def build(ctx: PolicyContext) -> Pipeline:
    """Least outstanding requests; ties broken by a RNG seeded with ``ctx.seed``."""
    return Pipeline(
        "least_outstanding",
        filters=[ModelFilter(), HealthFilter()],
        scorers=[(LeastOutstandingScorer(), 1.0)],
        picker=MaxScorePicker(seed=ctx.seed),
    )
