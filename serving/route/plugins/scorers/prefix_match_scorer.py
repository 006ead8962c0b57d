"""``prefix-match-scorer``: the share of the prompt a replica is expected to hold cached.

Grade = cached tokens / prompt tokens, from the router's own prefix index (what it sent where)
or, on a planned prefix group, the group's prefix on the replicas the plan routes it to.

Parameters: none.
"""

from __future__ import annotations

from serving.route.plugins.base import FallbackContext
from serving.route.plugins.params import Params


class PrefixMatchScorer:
    name = "prefix-match-scorer"
    signals: tuple[str, ...] = ("router prefix index", "plan.groups.prefix_tokens")

    def score(self, ctx: FallbackContext, candidates: list[int]) -> list[float]:
        total = ctx.query.input_tokens
        if total <= 0:
            return [0.0] * len(candidates)
        cached = ctx.cached
        return [min(1.0, cached.get(i, 0) / total) for i in candidates]

    @classmethod
    def from_params(cls, params: Params) -> PrefixMatchScorer:
        params.finish()
        return cls()
