"""What a request costs: GPU-seconds predicted from its prompt and output tokens on the replica
kind that serves it — the unit tenants' credits are charged in.

Counting tokens charges a tenant of 2,000-token prompts and 20-token answers (code completion)
and one of 50-token prompts and 1,000-token answers (reasoning) by weights that hold for
neither: a prompt token is computed in a batch of thousands, an output token in an iteration
shared by the decoding sequences, and both cost more on a slower accelerator. Here, on a kind
(accelerator, model, TP):

- **prefill**: ``uncached · s_prompt + cached · CACHE_HIT_CHARGE · s_prompt``, with ``s_prompt``
  the seconds per token of a full prefill chunk (:mod:`serving.route.ttft`'s queue rate). A
  prompt token found in the prefix cache skips its GEMMs and its attention; it is charged
  :data:`CACHE_HIT_CHARGE` of a computed one for the KV it holds and the attention it is read
  by;
- **decode**: per output token, the sequence's share of a decode iteration at a mid-size batch
  (:data:`REFERENCE_BATCH` sequences, :mod:`serving.route.decode_steps`) plus its own attention
  over its context (prompt and half its output on average);

times the kind's TP degree (GPUs held). Rates are built once per kind from the roofline prior.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
import numpy.typing as npt

from serving.route.decode_steps import SLOPE_AT_SEQUENCES, decode_step_table
from serving.route.ttft import prefill_table

Tokens = npt.ArrayLike
Seconds = np.ndarray[Any, np.dtype[np.float64]]

# a cached prompt token is charged this share of a computed one (KV held, attention read)
CACHE_HIT_CHARGE = 0.1
# decode iterations are shared by the sequences in flight: a sequence's share is read here
REFERENCE_BATCH = SLOPE_AT_SEQUENCES


@dataclass(frozen=True, slots=True)
class GpuRates:
    """GPU-seconds per token on one replica kind (or an average over a fleet's kinds)."""

    label: str
    prompt_s: float  # per computed prompt token
    decode_s: float  # per output token, before its context's attention
    context_s: float  # per output token and context token (its attention)
    gpus: int = 1

    def prefill(self, input_tokens: int, cached_tokens: int = 0) -> float:
        """GPU-seconds of a prompt of ``input_tokens``, ``cached_tokens`` of them cached."""
        # conditional expressions, not min()/max() (several times dearer): once per decision
        total = input_tokens if input_tokens > 0 else 0
        cached = cached_tokens if cached_tokens > 0 else 0
        cached = total if cached > total else cached
        return self.gpus * self.prompt_s * (total - cached + CACHE_HIT_CHARGE * cached)

    def decode(self, input_tokens: int, output_tokens: int) -> float:
        """GPU-seconds of generating ``output_tokens`` after a prompt of ``input_tokens``."""
        if output_tokens <= 0:
            return 0.0
        context = (input_tokens if input_tokens > 0 else 0) + 0.5 * output_tokens
        return self.gpus * output_tokens * (self.decode_s + self.context_s * context)

    def request(self, input_tokens: int, cached_tokens: int, output_tokens: int) -> float:
        """GPU-seconds of a whole request."""
        return self.prefill(input_tokens, cached_tokens) + self.decode(input_tokens, output_tokens)

    def requests(
        self, input_tokens: Tokens, cached_tokens: Tokens, output_tokens: Tokens
    ) -> Seconds:
        """:meth:`request` over arrays of requests."""
        inputs = np.maximum(np.asarray(input_tokens, dtype=np.float64), 0.0)
        cached = np.clip(np.asarray(cached_tokens, dtype=np.float64), 0.0, inputs)
        out = np.maximum(np.asarray(output_tokens, dtype=np.float64), 0.0)
        prefill = self.prompt_s * (inputs - cached + CACHE_HIT_CHARGE * cached)
        decode = out * (self.decode_s + self.context_s * (inputs + 0.5 * out))
        return self.gpus * (prefill + decode)


@lru_cache(maxsize=128)
def gpu_rates(accelerator: str, model: str, tp: int) -> GpuRates:
    """The rates of one replica kind (kinds the catalogue does not know get the generic
    tables' rates)."""
    prefill = prefill_table(accelerator, model, tp)
    steps = decode_step_table(accelerator, model, tp)
    return GpuRates(
        label=steps.label,
        prompt_s=prefill.queue_s_per_token,
        decode_s=steps.decode_step(REFERENCE_BATCH, 0.0) / REFERENCE_BATCH,
        context_s=steps.per_context_s,
        gpus=max(tp, 1),
    )


def mean_rates(kinds: Iterable[tuple[str, str, int]]) -> GpuRates:
    """The rates averaged over replicas (one ``(accelerator, model, tp)`` per replica): what a
    request costs where it is not yet known which replica serves it."""
    rates = [gpu_rates(*k) for k in kinds]
    if not rates:
        return gpu_rates("", "", 1)
    n = float(len(rates))
    return GpuRates(
        label="mean of " + ", ".join(sorted({r.label for r in rates})),
        prompt_s=sum(r.prompt_s * r.gpus for r in rates) / n,
        decode_s=sum(r.decode_s * r.gpus for r in rates) / n,
        context_s=sum(r.context_s * r.gpus for r in rates) / n,
        gpus=1,
    )
