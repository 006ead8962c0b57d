"""``kv-usage-scorer``: free KV cache is better; grade = 1 − scraped ``kv_cache_usage_perc``.

Parameters: none.
"""

from __future__ import annotations

from serving.route.plugins.base import FallbackContext
from serving.route.plugins.params import Params


class KvUsageScorer:
    name = "kv-usage-scorer"
    signals: tuple[str, ...] = ("kv_cache_usage_perc",)

    def score(self, ctx: FallbackContext, candidates: list[int]) -> list[float]:
        states = ctx.fleet.states
        return [min(1.0, max(0.0, 1.0 - states[i].kv_cache_usage_perc)) for i in candidates]

    @classmethod
    def from_params(cls, params: Params) -> KvUsageScorer:
        params.finish()
        return cls()
