"""A cost model with explicit coefficients: the seam tests use to get hand-computable times."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True, kw_only=True)
class LinearCostModel:
    """``overhead + per_token·m + Σ attn_pair·chunk·(ctx + chunk/2) + per_seq·n + per_ctx·Σctx``."""

    overhead_s: float = 0.005
    per_token_s: float = 1e-5
    attn_pair_s: float = 0.0
    per_seq_s: float = 0.0
    per_context_token_s: float = 1e-7

    def linear_s(self, tokens: int) -> float:
        return self.per_token_s * tokens

    def prefill_attention_s(self, chunk_tokens: int, context_tokens: int) -> float:
        return self.attn_pair_s * chunk_tokens * (context_tokens + chunk_tokens / 2)

    def decode_attention_coeffs(self, n: int) -> tuple[float, float]:
        return (self.per_seq_s * n, self.per_context_token_s)

    def iteration_s(
        self, prefill_chunks: list[tuple[int, int]], n_decode: int, decode_context: int
    ) -> float:
        m = n_decode + sum(c for c, _ in prefill_chunks)
        d0, d1 = self.decode_attention_coeffs(n_decode)
        t = self.overhead_s + self.linear_s(m) + d0 + d1 * decode_context
        for chunk, ctx in prefill_chunks:
            t += self.prefill_attention_s(chunk, ctx)
        return t
