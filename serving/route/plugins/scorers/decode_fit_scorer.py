"""``decode-fit-scorer``: a short decode prefers a replica where a prompt chunk sharing its
iterations cannot push its TPOT past the limit.

With chunked prefill every iteration a request decodes in may also carry a chunk of the
prompts queued behind it (:mod:`serving.route.decode_steps`). On an H100 serving Llama-3-8B
such an iteration (~50 ms) is under an interactive TPOT SLO of 100 ms and no backlog can make a
request miss it; on an A100 or L40S (~140–150 ms) it is not, and a decode of a dozen tokens
that overlaps a burst of prompts misses — on the head of the reasoning-vs-code mix over the
heterogeneous fleet, 57–89% of A100/L40S decodes under 16 tokens missed their TPOT at loads
0.5–1.4, and decodes of 64 tokens or more at most a quarter as often (a long decode averages
the chunks over its many iterations). Sending the short decodes to the replicas where they fit
and leaving the slower ones to long decodes, whose chunks average out, is the placement the
rest of the profile (TTFT, queue, prefix) does not see.

Grade of replica ``i`` for a request of ``o`` output tokens: 1 where the full-chunk step
(``C − 1`` prompt tokens beside one decoding sequence) is at most ``tpot_s``; elsewhere
``min(1, (o − 1) / average_iterations)`` (1 with a single output token: no TPOT). Not
normalised over the candidates (a fleet where every replica fits grades them all 1, and the
other scorers decide).

Parameters: ``tpot_s`` (the TPOT limit judged against, default the interactive SLO, 0.1 s),
``average_iterations`` (decode iterations past which chunks average out, default 64).
"""

from __future__ import annotations

from functools import lru_cache

from serving.route.decode_steps import decode_step_table
from serving.route.plugins.base import FallbackContext
from serving.route.plugins.params import Params

DEFAULT_TPOT_S = 0.1
DEFAULT_AVERAGE_ITERATIONS = 64.0


@lru_cache(maxsize=128)
def full_chunk_step_s(accelerator: str, model: str, tp: int) -> float:
    """One iteration of a single decoding sequence beside a full prompt chunk on the kind."""
    table = decode_step_table(accelerator, model, tp)
    budget = table.prompt_budget(1.0)
    return table.decode_step(1.0, 0.0) + table.prefill_s_per_token * budget


class DecodeFitScorer:
    name = "decode-fit-scorer"
    signals: tuple[str, ...] = ("decode step table", "max_output_tokens")

    def __init__(
        self,
        *,
        tpot_s: float = DEFAULT_TPOT_S,
        average_iterations: float = DEFAULT_AVERAGE_ITERATIONS,
    ) -> None:
        self.tpot_s = tpot_s
        self.average_iterations = average_iterations

    def score(self, ctx: FallbackContext, candidates: list[int]) -> list[float]:
        states = ctx.fleet.states
        gaps = ctx.query.max_output_tokens - 1
        if gaps <= 0:  # no decode iteration, no TPOT: fits anywhere
            return [1.0] * len(candidates)
        spread = min(1.0, gaps / self.average_iterations)
        out: list[float] = []
        for i in candidates:
            s = states[i]
            fits = full_chunk_step_s(s.accelerator, s.model, s.tp) <= self.tpot_s
            out.append(1.0 if fits else spread)
        return out

    @classmethod
    def from_params(cls, params: Params) -> DecodeFitScorer:
        tpot = params.number("tpot_s", DEFAULT_TPOT_S, minimum=0.0, above=True)
        average = params.number("average_iterations", DEFAULT_AVERAGE_ITERATIONS, minimum=1.0)
        params.finish()
        return cls(tpot_s=tpot, average_iterations=average)
