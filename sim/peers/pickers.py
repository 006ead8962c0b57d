"""Generic pickers: the highest weighted score, or uniformly at random."""

from __future__ import annotations

import random

from placement.domain.requests import Request
from sim.router import ReplicaView

#: Scores closer than this are a tie (weighted sums of floats in [0, 1]).
SCORE_TIE_TOLERANCE = 1e-9


class MaxScorePicker:
    """Picks the candidate with the highest total score.

    Ties (within :data:`SCORE_TIE_TOLERANCE`) go to the lowest replica index when ``seed`` is
    None, else to a tied candidate drawn by a RNG seeded with ``seed`` (reproducible; the GIE
    max-score picker also breaks ties at random).
    """

    name = "max-score-picker"

    def __init__(self, seed: int | None = None) -> None:
        self._rng = None if seed is None else random.Random(seed)

    def pick(
        self, req: Request, candidates: list[ReplicaView], scores: list[float], now: float
    ) -> ReplicaView:
        best = max(scores)
        floor = best - SCORE_TIE_TOLERANCE
        tied = [i for i, s in enumerate(scores) if s >= floor]
        if len(tied) == 1:
            return candidates[tied[0]]
        if self._rng is None:
            return min((candidates[i] for i in tied), key=lambda c: c.index)
        return candidates[tied[self._rng.randrange(len(tied))]]


class RandomPicker:
    """Uniform choice among the candidates, from a RNG seeded with ``seed``; ignores scores."""

    name = "random-picker"

    def __init__(self, seed: int) -> None:
        self._rng = random.Random(seed)

    def pick(
        self, req: Request, candidates: list[ReplicaView], scores: list[float], now: float
    ) -> ReplicaView:
        return candidates[self._rng.randrange(len(candidates))]
