"""``freshness-filter``: refuses replicas whose metrics are older than the staleness limit.

A replica never scraped (``scraped_at`` < 0) is stale. Stale metrics make every load signal
a guess, so planned traffic goes elsewhere until the next scrape lands.

Parameters: ``staleness_limit_s`` (> 0, default :data:`DEFAULT_STALENESS_LIMIT_S`).
"""

from __future__ import annotations

from serving.route.plugins.params import Params
from serving.route.types import ReplicaState

DEFAULT_STALENESS_LIMIT_S = 5.0


class FreshnessFilter:
    name = "freshness-filter"
    signals: tuple[str, ...] = ("scraped_at",)
    cause = "stale"

    def __init__(self, staleness_limit_s: float = DEFAULT_STALENESS_LIMIT_S) -> None:
        self.staleness_limit_s = staleness_limit_s

    def admits(self, state: ReplicaState, cap_in_flight: float, now: float) -> bool:
        scraped = state.scraped_at
        return scraped >= 0.0 and now - scraped <= self.staleness_limit_s

    @classmethod
    def from_params(cls, params: Params) -> FreshnessFilter:
        limit = params.number("staleness_limit_s", DEFAULT_STALENESS_LIMIT_S, minimum=0, above=True)
        params.finish()
        return cls(limit)
