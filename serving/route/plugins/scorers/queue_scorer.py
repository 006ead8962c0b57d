"""``queue-scorer``: fewer requests in flight is better (the router's own exact count, plus the
scraped waiting queue, which also counts other routers' requests).

Min-max normalised over the candidates. Parameters: none.
"""

from __future__ import annotations

from placement.domain.scoring import lower_is_better
from serving.route.plugins.base import FallbackContext
from serving.route.plugins.params import Params


class QueueScorer:
    name = "queue-scorer"
    signals: tuple[str, ...] = ("in_flight", "num_requests_waiting")

    def score(self, ctx: FallbackContext, candidates: list[int]) -> list[float]:
        states = ctx.fleet.states
        return lower_is_better(
            [states[i].in_flight + states[i].num_requests_waiting for i in candidates]
        )

    @classmethod
    def from_params(cls, params: Params) -> QueueScorer:
        params.finish()
        return cls()
