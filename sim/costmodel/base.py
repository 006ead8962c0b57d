"""The contract between the engine cost model and the simulator.

One iteration of a continuous-batching engine runs ``m`` tokens through the model: the decode
sequences (one token each) plus prefill chunks. Its time is

    overhead_s
    + linear_s(m)                                   # GEMMs (+ MoE, all-reduce for TP>1)
    + Σ_chunks prefill_attention_s(chunk, context)  # context attention of each prefill chunk
    + d0 + d1 · Σ decode context lengths            # decode attention:
                                                    #   (d0, d1) = decode_attention_coeffs(n)

The decode term is affine in the summed context on purpose: while a batch is unchanged, the
simulator advances a replica over many iterations in closed form (an arithmetic series).
Every method must be O(1) (table lookups): it is called once per simulated iteration.
"""

from __future__ import annotations

from typing import Protocol


class IterationCostModel(Protocol):
    """Iteration-time model of one replica kind (accelerator, model, TP); times in seconds."""

    overhead_s: float

    def linear_s(self, tokens: int) -> float:
        """Token-linear work (all GEMMs, MoE experts, TP all-reduce) for ``tokens`` tokens."""
        ...

    def prefill_attention_s(self, chunk_tokens: int, context_tokens: int) -> float:
        """Context attention of one prefill chunk over ``context_tokens`` already cached."""
        ...

    def decode_attention_coeffs(self, n: int) -> tuple[float, float]:
        """(fixed, per-context-token) decode-attention time for ``n`` decoding sequences."""
        ...

    def iteration_s(
        self, prefill_chunks: list[tuple[int, int]], n_decode: int, decode_context: int
    ) -> float:
        """Whole iteration: ``prefill_chunks`` is [(chunk_tokens, context_tokens)]."""
        ...
