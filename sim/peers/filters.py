"""Filters every policy starts with: a replica must serve the request's model and be up."""

from __future__ import annotations

from operator import attrgetter

from placement.domain.requests import Request
from sim.router import ReplicaView

_healthy = attrgetter("healthy")


class ModelFilter:
    """Keeps replicas serving ``req.model``; a request with no model (``""``) keeps all."""

    name = "model-filter"

    def filter(self, req: Request, candidates: list[ReplicaView], now: float) -> list[ReplicaView]:
        model = req.model
        if not model:
            return candidates
        return [r for r in candidates if r.model == model]


class HealthFilter:
    """Keeps replicas the router believes healthy (``ReplicaView.healthy``)."""

    name = "health-filter"

    def filter(self, req: Request, candidates: list[ReplicaView], now: float) -> list[ReplicaView]:
        return list(filter(_healthy, candidates))
