"""The prior: TTFT and TPOT from the replica kind's engine cost model, vectorised over requests.

It serves twice: as two features of the learned models (their log) and as the baseline every
learned model must beat (and, with no promoted predictor, as the source of capacity at SLO).
Every operator time comes from the kind's own cost model
(:func:`sim.costmodel.factory.cost_model_for`: its measured operator tables when it has them,
else the datasheet roofline with utilization learned on the profiled accelerators; see
:mod:`sim.costmodel.sources`), read once per kind into :class:`KindRoofline` and evaluated on
arrays. Replica settings the telemetry does not carry take the fleet defaults:
``max_num_batched_tokens`` C = 2048, ``max_num_seqs`` 256, ``gpu_memory_utilization`` 0.9.

Notation per request: ``u`` uncached prompt tokens, ``c`` cached ones, ``d`` = running
sequences at arrival, ``w`` = waiting ones, ``K`` = KV tokens in use (``kv_cache_usage_perc`` ×
the replica's KV capacity), ``overhead`` the framework's per-iteration time.

**TTFT** = own prefill + queue:

- each iteration carries the ``d`` running sequences' decode tokens, so the prefill budget is
  ``b = C − min(d, C/2)`` tokens; the prompt's ``u`` tokens take ``n = ⌈u / b⌉`` iterations;
- own prefill = ``n · (overhead + decode attention(d, K)) + (n−1) · linear(b + d) + linear(r + d)``
  (``r`` the last chunk) + the prompt's causal attention over its cached prefix: per new token,
  per chunk and per query-key pair (``u·c + u²/2`` pairs) as the cost model charges it (for the
  constant-efficiency roofline, the larger of its compute time and its memory time: queries
  once, per chunk the cached prefix plus on average half the prompt, ``n·c + u·(n+1)/2``
  context tokens — an upper bound that keeps the prior monotone in ``d``);
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
from sim.costmodel.base import IterationCostModel
from sim.costmodel.factory import cost_model_for
from sim.costmodel.roofline import RooflineCostModel

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
    """What determines a replica's speed: the model on ``tp`` accelerators of one kind.

    ``timings`` replaces the kind's own engine cost model (what the simulator would run:
    measured tables, an end-to-end fit or the datasheet fallback) when given.
    """

    accelerator: Accelerator
    model: ModelArchitecture
    tp: int
    timings: IterationCostModel | None = None

    @property
    def label(self) -> str:
        return f"{self.model.name} on {self.tp}×{self.accelerator.kind}"


@dataclass(frozen=True, slots=True, kw_only=True)
class KindRoofline:
    """Per-kind constants of the prior, all in seconds, read off the kind's cost model.

    Prefill attention of ``u`` new tokens over ``c`` cached ones is
    ``max(pair_s·pairs, q_byte_s·u + kv_byte_s·context read) + token_s·u + chunk_s`` per
    chunk (measured-table models have ``q_byte_s = kv_byte_s = 0``); decode attention of ``n``
    sequences over ``C`` summed context tokens is ``decode_fixed[n] + decode_slope[n]·C``, or
    more if a smaller batch (a power of two, where the tables bend) costs more at that ``C``: the
    prior never falls as the batch grows, while a larger batch keeps its lower cost per token.
    """

    linear_table: FloatArray  # linear_s(m) for m = 0 … LINEAR_TABLE_TOKENS
    overhead_s: float
    decode_fixed: FloatArray  # decode attention: fixed time for n = 0 … DECODE_TABLE_SEQS
    decode_slope: FloatArray  # … and time per summed context token
    pair_s: float  # prefill attention per query-key pair
    token_s: float  # … per new token
    chunk_s: float  # … per chunk
    q_byte_s: float  # … memory per query token (roofline form)
    kv_byte_s: float  # … memory per context token read (roofline form)
    kv_capacity_tokens: float
    max_batched_tokens: int
    max_num_seqs: int

    def linear_s(self, tokens: FloatArray) -> FloatArray:
        """Vectorised ``linear_s``: table lookup, linear scaling past the table."""
        return _lookup(self.linear_table, tokens)

    def full_chunk_s(self) -> float:
        """One iteration that prefills a full chunk (``max_batched_tokens``) and nothing else:
        ``chunk / full_chunk_s()`` is the replica's prefill rate."""
        chunk = float(self.max_batched_tokens)
        return self.overhead_s + float(self.linear_s(np.asarray([chunk]))[0])

    def linear_envelope_s(self, tokens: FloatArray) -> FloatArray:
        """``linear_s`` at the lowest time per token of any batch up to ``tokens``: a larger
        batch never costs more per token (kernel tile steps smoothed out), so the throughput
        it implies never falls as the batch grows."""
        per_token = np.minimum.accumulate(
            self.linear_table[1:] / np.arange(1, len(self.linear_table))
        )
        table = np.concatenate([[0.0], per_token * np.arange(1, len(self.linear_table))])
        return _lookup(table, tokens)

    def decode_s(self, n: FloatArray, context: FloatArray) -> FloatArray:
        """Decode attention of ``n`` sequences over ``context`` summed tokens (0 for none)."""
        top = len(self.decode_slope) - 1
        n, context = np.broadcast_arrays(np.asarray(n, np.float64), np.asarray(context, np.float64))
        out = _lookup(self.decode_fixed, n) + self.decode_slope[_index(n, top)] * context
        # the smaller batches (powers of two) at or below each n, all at once
        powers = _POWERS_OF_TWO
        ks = powers[powers <= min(top, float(np.max(n, initial=0.0)))]
        if ks.size:
            flat_n, flat_c = n.reshape(-1, 1), context.reshape(-1, 1)
            smaller = self.decode_fixed[ks] + self.decode_slope[ks] * flat_c
            worst = np.where(flat_n >= ks, smaller, -np.inf).max(axis=1)
            out = np.maximum(out, worst.reshape(out.shape))
        return np.asarray(out, dtype=np.float64)


_POWERS_OF_TWO = 2 ** np.arange(31, dtype=np.int64)


def _index(x: FloatArray, top: int) -> npt.NDArray[np.int64]:
    return np.clip(x, 0, top).astype(np.int64)


def _lookup(table: FloatArray, x: FloatArray) -> FloatArray:
    top = len(table) - 1
    v = np.maximum(x, 0.0)
    inside = table[np.minimum(v, top).astype(np.int64)]
    return np.where(v <= top, inside, table[top] * v / top)


# Probe points for the prefill-attention coefficients of any cost model (chunk, context).
_PROBES = ((1024, 0), (1024, 4096), (2048, 0))
DECODE_TABLE_SEQS = 1024


def _attention_coefficients(cost: IterationCostModel) -> tuple[float, float, float]:
    """(per pair, per token, per chunk) of ``c·token + pair·c·(p + c/2) + chunk`` solved from
    three probes: exact for the measured-table form (and the stack calibration's)."""
    (c1, p1), (_, p2), (c3, _) = _PROBES
    f1, f2, f3 = (cost.prefill_attention_s(c, p) for c, p in _PROBES)
    pair = (f2 - f1) / (c1 * (p2 - p1))
    # f1 = chunk + c1·token + pair·c1²/2 ; f3 = chunk + c3·token + pair·c3²/2
    token = (f3 - f1 - pair * (c3 * c3 - c1 * c1) / 2.0) / (c3 - c1)
    chunk = f1 - c1 * token - pair * c1 * c1 / 2.0
    return max(pair, 0.0), max(token, 0.0), max(chunk, 0.0)


@lru_cache(maxsize=256)
def kind_roofline(kind: ReplicaKind) -> KindRoofline:
    """The prior's constants of one replica kind, from its cost model (cached)."""
    cost = (
        kind.timings
        if kind.timings is not None
        else cost_model_for(kind.accelerator, kind.model, kind.tp)
    )
    tokens = np.arange(0, LINEAR_TABLE_TOKENS + 1)
    table = np.asarray([cost.linear_s(int(m)) for m in tokens], dtype=np.float64)
    table[0] = 0.0
    coeffs = np.asarray(
        [cost.decode_attention_coeffs(n) for n in range(DECODE_TABLE_SEQS + 1)], dtype=np.float64
    )
    legacy = isinstance(cost, RooflineCostModel) and cost.efficiency is not None
    if legacy:  # the constant-efficiency roofline's own max(compute, memory) form
        assert isinstance(cost, RooflineCostModel)
        pair, token, chunk = cost._pair_flop_s, 0.0, 0.0
        q_byte, kv_byte = cost._q_byte_s, cost._kv_byte_s
    else:
        pair, token, chunk = _attention_coefficients(cost)
        q_byte = kv_byte = 0.0
    return KindRoofline(
        linear_table=table,
        overhead_s=float(cost.overhead_s),
        decode_fixed=coeffs[:, 0],
        decode_slope=coeffs[:, 1],
        pair_s=pair,
        token_s=token,
        chunk_s=chunk,
        q_byte_s=q_byte,
        kv_byte_s=kv_byte,
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


_PER_KIND = (
    "overhead_s",
    "pair_s",
    "token_s",
    "chunk_s",
    "q_byte_s",
    "kv_byte_s",
    "kv_capacity_tokens",
    "max_batched_tokens",
)


def _per_kind(kinds: tuple[ReplicaKind, ...], index: IntArray) -> dict[str, FloatArray]:
    """Broadcast the scalar per-kind constants to one value per request (one kind: a single
    value, which broadcasts alike)."""
    rooflines = [kind_roofline(k) for k in kinds]
    if len(rooflines) == 1:
        return {
            name: np.array([getattr(rooflines[0], name)], dtype=np.float64) for name in _PER_KIND
        }
    return {
        name: np.asarray([float(getattr(r, name)) for r in rooflines], np.float64)[index]
        for name in _PER_KIND
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


def _linear_envelope_s(
    kinds: tuple[ReplicaKind, ...], index: IntArray, tokens: FloatArray
) -> FloatArray:
    out = np.empty_like(tokens)
    for i, kind in enumerate(kinds):
        rows = index == i
        out[rows] = kind_roofline(kind).linear_envelope_s(tokens[rows])
    return out


def _decode_s(
    kinds: tuple[ReplicaKind, ...], index: IntArray, n: FloatArray, context: FloatArray
) -> FloatArray:
    """Decode attention of ``n`` sequences over ``context`` summed tokens, per request's kind."""
    if len(kinds) == 1:
        return kind_roofline(kinds[0]).decode_s(n, context)
    out = np.empty_like(n)
    for i, kind in enumerate(kinds):
        rows = index == i
        out[rows] = kind_roofline(kind).decode_s(n[rows], context[rows])
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
    decode_attn = _decode_s(x.kinds, x.kind_index, d, np.where(d > 0, context, 0.0))
    full_iter = _linear_s(x.kinds, x.kind_index, budget + d)
    last_iter = _linear_s(x.kinds, x.kind_index, last + d)
    attn_compute = k["pair_s"] * (u * c + 0.5 * u * u)
    # context read over the chunks: n·c plus the prompt's own tokens, half on average
    ctx_read = n_iter * c + u * (n_iter + 1.0) / 2.0
    attn_memory = k["q_byte_s"] * u + k["kv_byte_s"] * ctx_read
    prefill = (
        n_iter * (k["overhead_s"] + decode_attn)
        + (n_iter - 1.0) * full_iter
        + last_iter
        + np.maximum(attn_compute, attn_memory)
        + k["token_s"] * u
        + n_iter * k["chunk_s"]
    )
    backlog = x.backlog_prefill_tokens * (1.0 - np.clip(x.prefix_cache_hit_rate, 0.0, 1.0))
    ahead = np.maximum(x.waiting * QUEUED_PROMPT_TOKENS, backlog)
    queue = ahead / budget * (k["overhead_s"] + full_iter + decode_attn)

    n_dec = d + 1.0
    dec_context = context + x.input_tokens + x.output_tokens / 2.0
    iteration = (
        k["overhead_s"]
        + _linear_s(x.kinds, x.kind_index, n_dec)
        + _decode_s(x.kinds, x.kind_index, n_dec, dec_context)
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
    ``d · (1 − ρ) / iteration``; 0 when nothing runs. ``linear`` is taken at the lowest time per
    token of any smaller batch, so the rate never falls as more sequences run.
    """
    k = _per_kind(x.kinds, x.kind_index)
    d = x.running
    context = x.kv_usage * k["kv_capacity_tokens"]
    iteration = (
        k["overhead_s"]
        + _linear_envelope_s(x.kinds, x.kind_index, d)
        + _decode_s(x.kinds, x.kind_index, d, np.where(d > 0, context, 0.0))
    )
    return d * (1.0 - _prefill_share(x, k["max_batched_tokens"])) / iteration
