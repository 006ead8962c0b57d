"""``least-predicted-ttft-picker``: the eligible candidate with the least predicted TTFT
(:mod:`serving.route.ttft`), for planned replicas that are unhealthy, stale or over their cap.

Candidates are the plan's replicas for the key first (they likely hold the prefix), then the
pool in ring order from the key, at most the profile's ``candidates`` of them: a bounded cost
on a pool of any size. Ties keep candidate order. Parameters: none.
"""

from __future__ import annotations

from serving.route.plugins.base import FallbackContext, ReplicaScorer
from serving.route.plugins.params import Params


class LeastPredictedTtftPicker:
    name = "least-predicted-ttft-picker"
    signals: tuple[str, ...] = (
        "in_flight_prefill_tokens",
        "num_requests_waiting",
        "prefill table",
        "router prefix index",
    )

    def rank(self, ctx: FallbackContext) -> list[int]:
        candidates = ctx.candidates()
        ttft = [ctx.predicted_ttft(i) for i in candidates]
        order = sorted(range(len(candidates)), key=ttft.__getitem__)
        return [candidates[k] for k in order]

    @classmethod
    def from_params(
        cls, params: Params, scorers: tuple[tuple[ReplicaScorer, float], ...]
    ) -> LeastPredictedTtftPicker:
        params.finish()
        return cls()
