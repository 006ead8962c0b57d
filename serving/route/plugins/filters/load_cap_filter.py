"""``load-cap-filter``: refuses replicas over the load the plan can hold them to.

The plan caps each replica's *rate* at its capacity at SLO (``load_cap_rps``). The router sees
counts, not rates, so the cap becomes an in-flight count by Little's law:

    cap_in_flight = max(min_in_flight, ceil(load_cap_rps × residence_s))

``residence_s`` being the mean time a request spends in flight (to its last token) at the
plan's mix. A replica is over its cap when ``in_flight ≥ cap_in_flight`` (one more would exceed
it) or when its scraped queue holds more than ``max_waiting`` requests (the engine is already
saturated, whatever the router's count says). Replicas the plan does not cap (no plan, or not in
it) are held only to ``max_waiting``.

Parameters: ``residence_s`` (> 0, default 8), ``min_in_flight`` (≥ 1, default 4),
``max_waiting`` (≥ 0, default 16).
"""

from __future__ import annotations

import math

from placement.plan import ReplicaPlan
from serving.route.plugins.params import Params
from serving.route.types import ReplicaState

DEFAULT_RESIDENCE_S = 8.0
DEFAULT_MIN_IN_FLIGHT = 4
DEFAULT_MAX_WAITING = 16


class LoadCapFilter:
    name = "load-cap-filter"
    signals: tuple[str, ...] = ("in_flight", "num_requests_waiting", "plan.load_cap_rps")
    cause = "over-cap"

    def __init__(
        self,
        *,
        residence_s: float = DEFAULT_RESIDENCE_S,
        min_in_flight: int = DEFAULT_MIN_IN_FLIGHT,
        max_waiting: float = DEFAULT_MAX_WAITING,
    ) -> None:
        self.residence_s = residence_s
        self.min_in_flight = min_in_flight
        self.max_waiting = max_waiting

    def cap_of(self, replica: ReplicaPlan) -> float:
        """The in-flight cap of a replica the plan names."""
        return float(max(self.min_in_flight, math.ceil(replica.load_cap_rps * self.residence_s)))

    def admits(self, state: ReplicaState, cap_in_flight: float, now: float) -> bool:
        return state.in_flight < cap_in_flight and state.num_requests_waiting <= self.max_waiting

    @classmethod
    def from_params(cls, params: Params) -> LoadCapFilter:
        made = cls(
            residence_s=params.number("residence_s", DEFAULT_RESIDENCE_S, minimum=0, above=True),
            min_in_flight=params.integer("min_in_flight", DEFAULT_MIN_IN_FLIGHT, minimum=1),
            max_waiting=params.number("max_waiting", DEFAULT_MAX_WAITING, minimum=0),
        )
        params.finish()
        return made
