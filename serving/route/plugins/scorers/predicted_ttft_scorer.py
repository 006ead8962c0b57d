"""``predicted-ttft-scorer``: a lower predicted TTFT is better (:mod:`serving.route.ttft`:
own prefill of the uncached prompt plus the prefill queued ahead).

Min-max normalised over the candidates. Parameters: none.
"""

from __future__ import annotations

from placement.domain.scoring import lower_is_better
from serving.route.plugins.base import FallbackContext
from serving.route.plugins.params import Params


class PredictedTtftScorer:
    name = "predicted-ttft-scorer"
    signals: tuple[str, ...] = (
        "in_flight_prefill_tokens",
        "num_requests_waiting",
        "prefill table",
        "router prefix index",
    )

    def score(self, ctx: FallbackContext, candidates: list[int]) -> list[float]:
        return lower_is_better([ctx.predicted_ttft(i) for i in candidates])

    @classmethod
    def from_params(cls, params: Params) -> PredictedTtftScorer:
        params.finish()
        return cls()
