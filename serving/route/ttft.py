"""Predicted TTFT on the hot path: a per-replica-kind table built once, read in O(1).

For a replica of kind *k* (accelerator, model, TP) and a request with ``u`` uncached prompt
tokens, the route path predicts

    TTFT ≈ prefill_k(u) + queued_k / prefill_rate_k

- ``prefill_k(u)``: the roofline prior's own-prefill time of ``u`` tokens on an idle replica
  (:func:`models.roofline_prior.prior_latency` at zero load), tabulated at ``u = 2^j`` and
  interpolated linearly between grid points (extrapolated along the last segment beyond);
- ``queued_k``: uncached prompt tokens ahead of it, the larger of the router's own counter
  (``in_flight_prefill_tokens``: prompt tokens dispatched without a first token yet) and the
  scraped ``num_requests_waiting`` priced in prompt tokens (:mod:`serving.route.waiting_queue`:
  the mean uncached prompt the router dispatched there, or :data:`QUEUED_PROMPT_TOKENS` before
  it dispatched any, or always with the profile's ``waiting.price: constant``);
- ``prefill_rate_k``: tokens per second of a full prefill chunk, ``C / (overhead + linear(C))``.

Kinds the catalogue does not know (or that cannot be split over their TP) get a generic table
at :data:`GENERIC_PREFILL_TOKENS_PER_S`, so an unknown replica is still comparable.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from models.roofline_prior import QUEUED_PROMPT_TOKENS, PriorInputs, kind_roofline, prior_latency
from placement.errors import PlacementError

GRID_EXPONENTS = 18  # u = 1, 2, 4, … 131,072 tokens
GENERIC_PREFILL_TOKENS_PER_S = 10_000.0
GENERIC_OVERHEAD_S = 0.005

__all__ = ["GENERIC_PREFILL_TOKENS_PER_S", "QUEUED_PROMPT_TOKENS", "PrefillTable", "prefill_table"]


@dataclass(frozen=True, slots=True)
class PrefillTable:
    """``prefill_s[j]`` = own-prefill seconds of ``2^j`` tokens; ``queue_s_per_token`` = seconds
    a queued prompt token ahead adds (1 / prefill rate)."""

    label: str
    prefill_s: tuple[float, ...]
    queue_s_per_token: float

    def prefill(self, uncached_tokens: int) -> float:
        """Own-prefill time of ``uncached_tokens`` (at least one token is always computed)."""
        table = self.prefill_s
        u = uncached_tokens if uncached_tokens > 1 else 1
        j = u.bit_length() - 1  # 2^j ≤ u < 2^(j+1)
        top = len(table) - 1
        if j >= top:
            j = top - 1
        lo = 1 << j
        return table[j] + (table[j + 1] - table[j]) * (u - lo) / lo

    def ttft(self, uncached_tokens: int, queued_tokens: float) -> float:
        """Predicted TTFT behind ``queued_tokens`` prompt tokens (one call on the hot path)."""
        table = self.prefill_s
        u = uncached_tokens if uncached_tokens > 1 else 1
        j = u.bit_length() - 1
        if j >= len(table) - 1:
            j = len(table) - 2
        lo = 1 << j
        return (
            table[j]
            + (table[j + 1] - table[j]) * (u - lo) / lo
            + queued_tokens * self.queue_s_per_token
        )


def _generic_table() -> PrefillTable:
    per_token = 1.0 / GENERIC_PREFILL_TOKENS_PER_S
    return PrefillTable(
        "generic",
        tuple(GENERIC_OVERHEAD_S + (1 << j) * per_token for j in range(GRID_EXPONENTS)),
        per_token,
    )


@lru_cache(maxsize=128)
def prefill_table(accelerator: str, model: str, tp: int) -> PrefillTable:
    """The table of one replica kind (cached: a few ms to build, once per kind)."""
    from models.capacity import replica_kind  # heavy import, only at plan install

    try:
        kind = replica_kind(accelerator, model, max(tp, 1))
    except PlacementError:
        return _generic_table()
    n = GRID_EXPONENTS
    u = 2.0 ** np.arange(n, dtype=np.float64)
    zeros = np.zeros(n)
    prior = prior_latency(
        PriorInputs(
            kinds=(kind,),
            kind_index=np.zeros(n, dtype=np.int64),
            input_tokens=u,
            uncached_tokens=u,
            output_tokens=np.ones(n),
            running=zeros,
            waiting=zeros,
            kv_usage=zeros,
            prompt_tokens_per_s=zeros,
            prefix_cache_hit_rate=zeros,
            backlog_prefill_tokens=zeros,
        )
    )
    roof = kind_roofline(kind)
    per_token = roof.full_chunk_s() / float(roof.max_batched_tokens)
    return PrefillTable(kind.label, tuple(float(x) for x in prior.prefill_s), per_token)
