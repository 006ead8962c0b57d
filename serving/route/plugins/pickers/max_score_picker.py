"""``max-score-picker``: the greedy cache-and-load choice — the candidate with the highest
weighted sum of the profile's scorers (e.g. prefix match, queue, KV use), used with no plan.

Candidates are the replicas holding the request's prefix (router's index, deepest first),
then the pool in ring order from the key, at most the profile's ``candidates``. Ties keep
candidate order. Parameters: none (the weights are the scorers').
"""

from __future__ import annotations

from serving.route.plugins.base import FallbackContext, ReplicaScorer
from serving.route.plugins.params import Params


class MaxScorePicker:
    name = "max-score-picker"

    def __init__(self, scorers: tuple[tuple[ReplicaScorer, float], ...]) -> None:
        self.scorers = scorers
        self.signals: tuple[str, ...] = tuple(
            dict.fromkeys(sig for s, _ in scorers for sig in s.signals)
        )

    def rank(self, ctx: FallbackContext) -> list[int]:
        candidates = ctx.candidates()
        if len(candidates) <= 1:
            return candidates
        total = [0.0] * len(candidates)
        for scorer, weight in self.scorers:
            if weight:
                grades = scorer.score(ctx, candidates)
                total = [t + weight * g for t, g in zip(total, grades, strict=True)]
        order = sorted(range(len(candidates)), key=lambda k: -total[k])
        return [candidates[k] for k in order]

    @classmethod
    def from_params(
        cls, params: Params, scorers: tuple[tuple[ReplicaScorer, float], ...]
    ) -> MaxScorePicker:
        params.finish()
        return cls(scorers)
