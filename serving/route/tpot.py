"""Predicted TPOT of a replica before the router has observed any: a per-kind table over the
number of running sequences, built once, read in O(1).

For a replica of kind *k* running ``d`` sequences, the roofline prior's time per output token
(:func:`models.roofline_prior.prior_latency`) of one more request, each sequence holding
:data:`CONTEXT_TOKENS` of context, tabulated at ``d = 2^j − 1`` and interpolated linearly
between grid points (the last point beyond). It leaves out other requests' prefill sharing the
iterations, which the router's observed TPOT (:attr:`ReplicaState.tpot_s`) includes once
requests complete there; until then the prediction is what a lease's lifetime is built on.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from models.roofline_prior import (
    QUEUED_PROMPT_TOKENS,
    PriorInputs,
    ReplicaKind,
    kind_roofline,
    prior_latency,
)
from placement.domain.accelerators import get_accelerator
from placement.domain.llm import get_model
from placement.errors import PlacementError

GRID_EXPONENTS = 11  # d = 0, 1, 3, 7, … 1,023 running sequences
CONTEXT_TOKENS = QUEUED_PROMPT_TOKENS  # a chat turn's prompt per running sequence
OUTPUT_TOKENS = 256.0
GENERIC_TPOT_S = 0.05  # a kind the catalogue does not know: half the interactive TPOT SLO


@dataclass(frozen=True, slots=True)
class DecodeTable:
    """``tpot_s[j]`` = predicted TPOT with ``2^j − 1`` sequences already running."""

    label: str
    tpot_s: tuple[float, ...]

    def tpot(self, running: float) -> float:
        """Predicted TPOT of a request joining ``running`` sequences."""
        table = self.tpot_s
        d = int(running) if running > 0 else 0
        j = (d + 1).bit_length() - 1  # 2^j − 1 ≤ d < 2^(j+1) − 1
        top = len(table) - 1
        if j >= top:
            j = top - 1
        lo = (1 << j) - 1
        return table[j] + (table[j + 1] - table[j]) * (d - lo) / (1 << j)


@lru_cache(maxsize=128)
def decode_table(accelerator: str, model: str, tp: int) -> DecodeTable:
    """The table of one replica kind (cached: a millisecond to build, once per kind; the
    service builds it when a replica registers, off the route path)."""
    try:
        kind = ReplicaKind(get_accelerator(accelerator), get_model(model), max(tp, 1))
        capacity = kind_roofline(kind).kv_capacity_tokens  # raises if tp cannot split it
    except PlacementError:
        return DecodeTable("generic", (GENERIC_TPOT_S,) * GRID_EXPONENTS)
    n = GRID_EXPONENTS
    running = 2.0 ** np.arange(n, dtype=np.float64) - 1.0
    kv_usage = np.minimum(1.0, running * CONTEXT_TOKENS / max(capacity, 1.0))
    zeros = np.zeros(n)
    prompt = np.full(n, CONTEXT_TOKENS)
    prior = prior_latency(
        PriorInputs(
            kinds=(kind,),
            kind_index=np.zeros(n, dtype=np.int64),
            input_tokens=prompt,
            uncached_tokens=prompt,
            output_tokens=np.full(n, OUTPUT_TOKENS),
            running=running,
            waiting=zeros,
            kv_usage=kv_usage,
            prompt_tokens_per_s=zeros,
            prefix_cache_hit_rate=zeros,
            backlog_prefill_tokens=zeros,
        )
    )
    return DecodeTable(kind.label, tuple(float(x) for x in prior.tpot_s))
