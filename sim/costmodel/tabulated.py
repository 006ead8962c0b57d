"""The lookup half every tabulated cost model shares: linear work and decode attention by table.

Subclasses fill ``_linear`` (index = tokens, 0..``_max_tokens``), ``_decode`` (index = decoding
sequences, 0..``_max_seqs``: (fixed s, s per context token)) and ``overhead_s`` at
construction, and define ``prefill_attention_s``; the hot-path methods here are list lookups.
"""

from __future__ import annotations

from abc import ABC, abstractmethod


class TabulatedCostModel(ABC):
    overhead_s: float
    _linear: list[float]
    _max_tokens: int
    _decode: list[tuple[float, float]]
    _max_seqs: int

    def linear_s(self, tokens: int) -> float:
        """GEMMs, MoE, all-reduces and LM head for ``tokens`` tokens (s)."""
        if tokens <= self._max_tokens:
            return self._linear[tokens]
        return self._linear[self._max_tokens] * tokens / self._max_tokens

    @abstractmethod
    def prefill_attention_s(self, chunk_tokens: int, context_tokens: int) -> float:
        """Causal attention of one chunk over its cached context, all layers (s)."""

    def decode_attention_coeffs(self, n: int) -> tuple[float, float]:
        """(fixed s, s per summed context token) of decode attention for ``n`` sequences."""
        if n <= self._max_seqs:
            return self._decode[n]
        d0, d1 = self._decode[self._max_seqs]
        return (d0 * n / self._max_seqs, d1)

    def iteration_s(
        self, prefill_chunks: list[tuple[int, int]], n_decode: int, decode_context: int
    ) -> float:
        """One engine iteration: prefill ``[(chunk, context)]`` plus ``n_decode`` decodes (s)."""
        tokens = n_decode
        attention = 0.0
        for chunk, context in prefill_chunks:
            tokens += chunk
            attention += self.prefill_attention_s(chunk, context)
        d0, d1 = self.decode_attention_coeffs(n_decode)
        return self.overhead_s + self.linear_s(tokens) + attention + d0 + d1 * decode_context
