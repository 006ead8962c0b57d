"""``health-filter``: keeps replicas believed up (failed connections and scrapes mark them down).

Parameters: none.
"""

from __future__ import annotations

from serving.route.plugins.params import Params
from serving.route.types import ReplicaState


class HealthFilter:
    name = "health-filter"
    signals: tuple[str, ...] = ("healthy",)
    cause = "unhealthy"

    def admits(self, state: ReplicaState, cap_in_flight: float, now: float) -> bool:
        return state.healthy

    @classmethod
    def from_params(cls, params: Params) -> HealthFilter:
        params.finish()
        return cls()
