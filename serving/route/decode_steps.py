"""Decode iteration times per replica kind: what the admission gate's TPOT forecast is built
from (the lease's simpler predicted TPOT is :mod:`serving.route.tpot`).

With chunked prefill (vLLM's scheduler, and the simulator's engine) every iteration carries
one token of each of the ``n`` decoding sequences, and whatever is left of the token budget
``C`` (``max_num_batched_tokens``) goes to waiting prompts. A decoding request's TPOT is the
mean of the iterations it spans, which lie between two physical bounds:

- **decode-only**: ``overhead + linear(n) + n · attention per sequence + context · attention
  per context token`` — no prompt waiting;
- **full chunk**: the same plus ``(C − n)`` prompt tokens at the marginal cost of a prompt
  token, ``(linear(C) − linear(1)) / (C − 1)`` — a prompt queue that never empties.

On a fast accelerator the full-chunk iteration is shorter than an interactive TPOT SLO (an
H100 runs Llama-3-8B's 2,048-token chunk in ~45 ms) and chunked prefill cannot make a request
miss it; on a slower one (A100, L40S: ~120–130 ms) a request whose decode overlaps a prompt
backlog does. Both come from the roofline prior's per-kind constants
(:func:`models.roofline_prior.kind_roofline`), tabulated once per kind like
:mod:`serving.route.ttft`; the decode side matches measured engines within ~10%, the prefill
side is calibrated online by the admission gate (:mod:`serving.admission.ttft_calibration`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from models.roofline_prior import kind_roofline
from placement.errors import PlacementError
from serving.route.ttft import GENERIC_OVERHEAD_S, GENERIC_PREFILL_TOKENS_PER_S

DECODE_GRID_EXPONENTS = 10  # n = 1, 2, 4, … 512 decoding sequences
GENERIC_CHUNK_TOKENS = 2048
SLOPE_AT_SEQUENCES = 32
GENERIC_DECODE_STEP_S = 0.02  # a mid-range GPU's small-batch decode step

__all__ = ["DecodeStepTable", "decode_step_table"]


@dataclass(frozen=True, slots=True)
class DecodeStepTable:
    """``step_s[j]`` = a decode-only iteration of ``2^j`` sequences before their context's
    attention; ``per_context_s`` = attention seconds per context token read; a prompt token in
    a mixed iteration adds ``prefill_s_per_token``; ``chunk_tokens`` = the token budget C."""

    label: str
    step_s: tuple[float, ...]
    per_context_s: float
    prefill_s_per_token: float
    chunk_tokens: int
    # prefill attention: per query-key pair and per new token (0: not known, linear only)
    pair_s: float = 0.0
    attention_token_s: float = 0.0

    def decode_step(self, sequences: float, context_tokens: float) -> float:
        """One decode-only iteration of ``sequences`` over ``context_tokens`` summed context."""
        table = self.step_s
        n = int(sequences) if sequences > 1 else 1
        j = n.bit_length() - 1
        if j >= len(table) - 1:
            j = len(table) - 2
        lo = 1 << j
        step = table[j] + (table[j + 1] - table[j]) * (n - lo) / lo
        return step + max(context_tokens, 0.0) * self.per_context_s

    def prompt_work_s(self, tokens: int, cached_tokens: int = 0) -> float:
        """Seconds of chunk time a prompt of ``tokens`` costs, ``cached_tokens`` of them cached:
        its new tokens through the linear layers and their attention over the whole context
        (the cached prefix and the new tokens before each)."""
        cached = min(max(cached_tokens, 0), tokens)
        new = float(tokens - cached)
        pairs = new * (cached + new / 2.0)
        return new * (self.prefill_s_per_token + self.attention_token_s) + pairs * self.pair_s

    def prompt_budget(self, sequences: float) -> float:
        """Prompt tokens one iteration can take beside ``sequences`` decode tokens."""
        return max(self.chunk_tokens - max(sequences, 1.0), 0.0)


def _generic_table() -> DecodeStepTable:
    return DecodeStepTable(
        "generic",
        tuple(GENERIC_DECODE_STEP_S + GENERIC_OVERHEAD_S for _ in range(DECODE_GRID_EXPONENTS)),
        0.0,
        1.0 / GENERIC_PREFILL_TOKENS_PER_S,
        GENERIC_CHUNK_TOKENS,
    )


@lru_cache(maxsize=128)
def decode_step_table(accelerator: str, model: str, tp: int) -> DecodeStepTable:
    """The table of one replica kind (cached per kind)."""
    from models.capacity import replica_kind  # heavy import, only when a kind is first seen

    try:
        kind = replica_kind(accelerator, model, max(tp, 1))
    except PlacementError:
        return _generic_table()
    roof = kind_roofline(kind)
    n = 2.0 ** np.arange(DECODE_GRID_EXPONENTS, dtype=np.float64)
    step = roof.overhead_s + roof.linear_s(n) + roof.decode_s(n, np.zeros_like(n))
    # the attention cost per summed context token, read at a mid-size batch (the tables bend
    # little past a few dozen sequences)
    mid = np.asarray([float(SLOPE_AT_SEQUENCES)])
    per_context = float(roof.decode_s(mid, np.ones(1))[0] - roof.decode_s(mid, np.zeros(1))[0])
    chunk = roof.max_batched_tokens
    one, full = roof.linear_s(np.asarray([1.0, float(chunk)]))
    return DecodeStepTable(
        kind.label,
        tuple(float(x) for x in step),
        per_context,
        float(full - one) / (chunk - 1),
        chunk,
        roof.pair_s,
        roof.token_s,
    )
