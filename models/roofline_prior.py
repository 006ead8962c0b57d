"""The roofline prior: TTFT and TPOT from datasheet figures alone, vectorised over requests.

It serves twice: as two features of the learned models (their log) and as the baseline every
learned model must beat. Every operator time comes from :mod:`sim.costmodel.roofline` (the same
work formulas and fitted efficiencies as :class:`~sim.costmodel.roofline.RooflineCostModel`),
evaluated on arrays. Replica settings the telemetry does not carry take the fleet defaults:
``max_num_batched_tokens`` C = 2048, ``max_num_seqs`` 256, ``gpu_memory_utilization`` 0.9.

Notation per request: ``u`` uncached prompt tokens, ``c`` cached ones, ``d`` = running
sequences at arrival, ``w`` = waiting ones, ``K`` = KV tokens in use (``kv_cache_usage_perc`` ×
the replica's KV capacity), ``overhead`` the framework's per-iteration time.

**TTFT** = own prefill + queue:

- each iteration carries the ``d`` running sequences' decode tokens, so the prefill budget is
  ``b = C − min(d, C/2)`` tokens; the prompt's ``u`` tokens take ``n = ⌈u / b⌉`` iterations;
- own prefill = ``n · (overhead + decode attention(d, K)) + (n−1) · linear(b + d) + linear(r + d)``
  (``r`` the last chunk) + the prompt's causal attention over its cached prefix, taken as the
  larger of its total compute time (``u·c + u²/2`` query-key pairs) and its total memory time
  (queries once; per chunk the cached prefix plus on average half the prompt: ``n·c +
  u·(n+1)/2`` context tokens — an upper bound that keeps the prior monotone in ``d``);
- queue = the prefill ahead of it: ``P / b`` full iterations of ``overhead + linear(b + d) +
  decode attention(d, K)``. ``P`` is the larger of two estimates of the uncached prompt tokens
  still to prefill before this one: the router's own counter ``B`` (prompt tokens of the
  requests it sent there that have no first token yet, ``backlog_prefill_tokens``) × ``(1 −
  prefix-cache hit rate)``, and, from the gauges alone, ``w · Q`` with ``Q`` =
  :data:`QUEUED_PROMPT_TOKENS` (the gauges do not say how long the waiting prompts are). The
  larger one, because ``B = 0`` also means "the router did not say".

**TPOT** = a decode iteration at batch ``n = d + 1`` over the summed context ``K + input +
output/2`` (the request's own context half-way through its output), stretched by the other
requests' prefill work sharing the iterations: ``/ (1 − ρ)`` with ``ρ`` = uncached prompt
tokens per second × the time per prefill token (``linear(C) / C``), capped at :data:`RHO_MAX`.

Both are non-decreasing in input and uncached tokens and in every load input (running,
waiting, KV use, prompt rate, the router's backlog prefill tokens), and finite for any valid
input (TTFT is non-increasing in the hit rate, which only scales the backlog).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import numpy.typing as npt

from placement.domain.accelerators import Accelerator
from placement.domain.fleet import (
    DEFAULT_GPU_MEMORY_UTILIZATION,
    DEFAULT_MAX_BATCHED_TOKENS,
    DEFAULT_MAX_NUM_SEQS,
    kv_capacity_tokens,
)
from placement.domain.llm import ModelArchitecture
from sim.costmodel.operators import shard_shapes
from sim.costmodel.profiled import FRAMEWORK_OVERHEAD_S
from sim.costmodel.roofline import (
    FITTED_EFFICIENCY,
    decode_attention_slope_work,
    linear_work,
    peaks_of,
    roofline_s,
)

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

# Prompt tokens assumed for each waiting request (the queue term); the order of a chat turn.
QUEUED_PROMPT_TOKENS = 1024.0
# Largest share of iteration time that other requests' prefill may take in the TPOT stretch.
RHO_MAX = 0.9
# linear_s is tabulated up to this many tokens and scaled linearly beyond (as the cost models do).
LINEAR_TABLE_TOKENS = 8192


@dataclass(frozen=True, slots=True)
class ReplicaKind:
    """What determines a replica's speed: the model on ``tp`` accelerators of one kind."""

    accelerator: Accelerator
    model: ModelArchitecture
    tp: int

    @property
    def label(self) -> str:
        return f"{self.model.name} on {self.tp}×{self.accelerator.kind}"


@dataclass(frozen=True, slots=True, kw_only=True)
class KindRoofline:
    """Per-kind roofline constants, all in seconds (or s per token / per token pair)."""

    linear_table: FloatArray  # linear_s(m) for m = 0 … LINEAR_TABLE_TOKENS
    overhead_s: float
    decode_per_seq_s: float  # decode attention: fixed time per decoding sequence
    decode_per_context_s: float  # … and per summed context token
    pair_flop_s: float  # prefill attention compute per query-key pair
    q_byte_s: float  # … memory per query token
    kv_byte_s: float  # … memory per context token read
    kv_capacity_tokens: float
    max_batched_tokens: int
    max_num_seqs: int

    def linear_s(self, tokens: FloatArray) -> FloatArray:
        """Vectorised ``linear_s``: table lookup, linear scaling past the table."""
        top = len(self.linear_table) - 1
        m = np.maximum(tokens, 0.0)
        idx = np.minimum(m, top).astype(np.int64)
        inside = self.linear_table[idx]
        beyond = self.linear_table[top] * m / top
        return np.where(m <= top, inside, beyond)


@lru_cache(maxsize=256)
def kind_roofline(kind: ReplicaKind) -> KindRoofline:
    """Roofline constants of one replica kind (cached; ~1 ms to build)."""
    shapes = shard_shapes(kind.model, kind.tp)
    peaks = peaks_of(kind.accelerator)
    eff = FITTED_EFFICIENCY
    tokens = np.arange(0, LINEAR_TABLE_TOKENS + 1, dtype=np.float64)
    table = roofline_s(linear_work(shapes, tokens), peaks, eff)
    table[0] = 0.0
    slope = float(roofline_s([decode_attention_slope_work(shapes)], peaks, eff)[0])
    bw = peaks.hbm_bytes_per_s * eff.memory
    layers, hd, b = shapes.layers, shapes.head_dim, kind.model.dtype_bytes
    return KindRoofline(
        linear_table=table,
        overhead_s=FRAMEWORK_OVERHEAD_S,
        decode_per_seq_s=layers * 2.0 * shapes.heads * hd * b / bw,
        decode_per_context_s=slope,
        pair_flop_s=layers * 4.0 * shapes.heads * hd / (peaks.flops_per_s * eff.compute),
        q_byte_s=layers * b * hd * 2.0 * shapes.heads / bw,
        kv_byte_s=layers * b * hd * 2.0 * shapes.kv_heads / bw,
        kv_capacity_tokens=float(
            kv_capacity_tokens(
                kind.accelerator, kind.model, kind.tp, DEFAULT_GPU_MEMORY_UTILIZATION
            )
        ),
        max_batched_tokens=DEFAULT_MAX_BATCHED_TOKENS,
        max_num_seqs=DEFAULT_MAX_NUM_SEQS,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class PriorInputs:
    """One request per element: its replica kind (an index into ``kinds``), load and size."""

    kinds: tuple[ReplicaKind, ...]
    kind_index: IntArray
    input_tokens: FloatArray
    uncached_tokens: FloatArray
    output_tokens: FloatArray
    running: FloatArray
    waiting: FloatArray
    kv_usage: FloatArray  # 0..1
    prompt_tokens_per_s: FloatArray
    prefix_cache_hit_rate: FloatArray  # 0..1
    backlog_prefill_tokens: FloatArray  # router's counter: prompt tokens ahead, 0 when unknown

    def take(self, rows: IntArray) -> PriorInputs:
        """The requests ``rows`` (same kinds)."""
        return PriorInputs(
            kinds=self.kinds,
            kind_index=self.kind_index[rows],
            input_tokens=self.input_tokens[rows],
            uncached_tokens=self.uncached_tokens[rows],
            output_tokens=self.output_tokens[rows],
            running=self.running[rows],
            waiting=self.waiting[rows],
            kv_usage=self.kv_usage[rows],
            prompt_tokens_per_s=self.prompt_tokens_per_s[rows],
            prefix_cache_hit_rate=self.prefix_cache_hit_rate[rows],
            backlog_prefill_tokens=self.backlog_prefill_tokens[rows],
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class PriorLatency:
    """Prior times per request, in seconds (``ttft_s = prefill_s + queue_s``)."""

    ttft_s: FloatArray
    tpot_s: FloatArray
    prefill_s: FloatArray
    queue_s: FloatArray
    decode_step_s: FloatArray  # one decode iteration at batch running + 1, before the stretch
    prefill_share: FloatArray  # ρ, the others' prefill share of iteration time (0..RHO_MAX)

    def take(self, rows: IntArray) -> PriorLatency:
        return PriorLatency(
            ttft_s=self.ttft_s[rows],
            tpot_s=self.tpot_s[rows],
            prefill_s=self.prefill_s[rows],
            queue_s=self.queue_s[rows],
            decode_step_s=self.decode_step_s[rows],
            prefill_share=self.prefill_share[rows],
        )


def _per_kind(kinds: tuple[ReplicaKind, ...], index: IntArray) -> dict[str, FloatArray]:
    """Broadcast the scalar per-kind constants to one value per request."""
    rooflines = [kind_roofline(k) for k in kinds]
    names = (
        "overhead_s",
        "decode_per_seq_s",
        "decode_per_context_s",
        "pair_flop_s",
        "q_byte_s",
        "kv_byte_s",
        "kv_capacity_tokens",
        "max_batched_tokens",
    )
    return {
        name: np.asarray([float(getattr(r, name)) for r in rooflines], np.float64)[index]
        for name in names
    }


def _linear_s(kinds: tuple[ReplicaKind, ...], index: IntArray, tokens: FloatArray) -> FloatArray:
    """``linear_s`` of each request's own replica kind (one vectorised lookup per kind)."""
    if len(kinds) == 1:
        return kind_roofline(kinds[0]).linear_s(tokens)
    out = np.empty_like(tokens)
    for i, kind in enumerate(kinds):
        rows = index == i
        out[rows] = kind_roofline(kind).linear_s(tokens[rows])
    return out


def _prefill_share(x: PriorInputs, chunk: FloatArray) -> FloatArray:
    """ρ: the share of iteration time the replica spends on other requests' uncached prompt
    tokens (their rate × ``linear(C) / C`` s per token), at most :data:`RHO_MAX`."""
    per_prefill_token = _linear_s(x.kinds, x.kind_index, chunk) / chunk
    uncached_rate = x.prompt_tokens_per_s * (1.0 - np.clip(x.prefix_cache_hit_rate, 0.0, 1.0))
    return np.minimum(uncached_rate * per_prefill_token, RHO_MAX)


def prior_latency(x: PriorInputs) -> PriorLatency:
    """Roofline TTFT and TPOT of every request (see the module docstring for the formulas)."""
    k = _per_kind(x.kinds, x.kind_index)
    chunk = k["max_batched_tokens"]
    d = x.running
    u = np.maximum(x.uncached_tokens, 1.0)  # the last prompt token is always computed
    c = np.maximum(x.input_tokens - u, 0.0)
    context = x.kv_usage * k["kv_capacity_tokens"]

    budget = chunk - np.minimum(d, chunk / 2.0)
    n_iter = np.ceil(u / budget)
    last = u - (n_iter - 1.0) * budget
    decode_attn = (
        d * k["decode_per_seq_s"] + np.where(d > 0, context, 0.0) * k["decode_per_context_s"]
    )
    full_iter = _linear_s(x.kinds, x.kind_index, budget + d)
    last_iter = _linear_s(x.kinds, x.kind_index, last + d)
    attn_compute = k["pair_flop_s"] * (u * c + 0.5 * u * u)
    # context read over the chunks: n·c plus the prompt's own tokens, half on average
    ctx_read = n_iter * c + u * (n_iter + 1.0) / 2.0
    attn_memory = k["q_byte_s"] * u + k["kv_byte_s"] * ctx_read
    prefill = (
        n_iter * (k["overhead_s"] + decode_attn)
        + (n_iter - 1.0) * full_iter
        + last_iter
        + np.maximum(attn_compute, attn_memory)
    )
    backlog = x.backlog_prefill_tokens * (1.0 - np.clip(x.prefix_cache_hit_rate, 0.0, 1.0))
    ahead = np.maximum(x.waiting * QUEUED_PROMPT_TOKENS, backlog)
    queue = ahead / budget * (k["overhead_s"] + full_iter + decode_attn)

    n_dec = d + 1.0
    dec_context = context + x.input_tokens + x.output_tokens / 2.0
    iteration = (
        k["overhead_s"]
        + _linear_s(x.kinds, x.kind_index, n_dec)
        + n_dec * k["decode_per_seq_s"]
        + dec_context * k["decode_per_context_s"]
    )
    rho = _prefill_share(x, chunk)
    return PriorLatency(
        ttft_s=prefill + queue,
        tpot_s=iteration / (1.0 - rho),
        prefill_s=prefill,
        queue_s=queue,
        decode_step_s=iteration,
        prefill_share=rho,
    )


def prior_generation_rate(x: PriorInputs) -> FloatArray:
    """Roofline output tokens per second of each replica at its load (tok/s).

    ``d`` running sequences decode one token per iteration of ``overhead + linear(d) +
    decode attention(d, K)``, with the iterations' prefill share ``ρ`` (as in TPOT) lost:
    ``d · (1 − ρ) / iteration``; 0 when nothing runs.
    """
    k = _per_kind(x.kinds, x.kind_index)
    d = x.running
    context = x.kv_usage * k["kv_capacity_tokens"]
    iteration = (
        k["overhead_s"]
        + _linear_s(x.kinds, x.kind_index, d)
        + d * k["decode_per_seq_s"]
        + np.where(d > 0, context, 0.0) * k["decode_per_context_s"]
    )
    return d * (1.0 - _prefill_share(x, k["max_batched_tokens"])) / iteration
