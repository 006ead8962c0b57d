"""Operator timings of an accelerator known only from its datasheet, learned on profiled ones.

For every operator the datasheet gives a **speed of light** (SOL): the larger of its FLOPs at the
dense BF16 peak and its bytes at the HBM bandwidth (for an all-reduce: the ring's
``2·(n−1)/n`` of the message at the interconnect bandwidth). A prefill's attention has a third
bound: its softmax takes one exponential per query–key pair on the SMs' special-function units,
:data:`EXP_PER_SM_CYCLE` per SM per clock, which at head dim 64 takes longer than the tensor
cores' FLOPs on B200 and nearly as long on H100 (tensor cores grew, special-function units did
not). A measured latency is SOL divided by a *utilization*. As AIConfigurator does on one
system, utilization is looked up by shape in log space rather than latency itself; here it is
learned across accelerators so that it transfers to one with no tables:

    log(latency / SOL) = U_family(log10 SOL in clock cycles, second axis)

``U`` is a bilinear surface on a fixed knot grid, one per operator family:

==========================  ====================================================================
family                      second axis
==========================  ====================================================================
``gemm``                    log10 of compute time / memory time (the GEMM's balance)
``context_attention``       the same
``generation_attention``    log10 of the batch (sequences decoded together)
``communication``           log2 of the GPU count
``moe``                     log10 of compute time / memory time of the fused experts
==========================  ====================================================================

The first axis, SOL, carries the launch-bound floor (tiny calls reach a few percent of SOL),
the ramp (partial occupancy, tail effects) and the large-call plateau. For the kernels that run
on the accelerator's cores (every family but communication) it counts the SOL in cycles of the
datasheet's boost clock (shown as seconds at :data:`REFERENCE_CLOCK_GHZ`): a kernel's launch
floor and its ramp are a number of cycles, so an A100 at 1.41 GHz reaches the plateau later in
seconds than an L40S at 2.52 GHz. For GEMM it counts **SM-cycles** (cycles times the
datasheet's SM count, shown per :data:`REFERENCE_COMPUTE_UNITS` SMs): a GEMM is cut into output
tiles spread over the SMs, and a GPU with more SMs needs more tiles before every SM has its
share and the tail wave stops costing, so at the same SOL in cycles a 148-SM B200 is further
from its plateau than a 108-SM A100. An all-reduce's floor is the links' and the protocol's, so
communication keeps seconds. The second
axis separates compute-bound from memory-bound shapes (and, for decode, the per-sequence
work). A surface is fitted by iteratively reweighted least squares (Huber on log-ratios, each
accelerator weighted equally) with a second-difference smoothness penalty, on the tables of
the accelerators given; :func:`fit_transfer` is deterministic.

**GEMM columns.** The GEMM tables of every profiled GPU share their weight shapes ``(n, k)``
(440 columns in common). At the same SOL and balance a column runs nearer to or further from SOL
than the surface says for reasons of its own shape, shared by every GPU that runs it with the
same library: tile and wave quantization of ``n`` and ``k``, the kernel the library picks for it.
So the GEMM fit is joint: ``log(latency / SOL) = U_gemm(...) + c(n, k)``, alternating the surface
(on calls less their column's effect) and the column effects (per column, the median over GPUs of
each GPU's median residual, centred on the median column, shrunk by ``g / (g + 1)`` for ``g``
GPUs: the GPU being predicted counts as one more whose effect is unknown, i.e. 0). A column no
GPU measured is taken to be the typical one (effect 0). Nothing is fitted per GPU.

**MoE routing.** The MoE surface learns the fused experts under **balanced** routing, the tables
the cost model reads first. A table measured only under skewed routing (``power_law``: fewer
experts touched by a few tokens, one expert's rows on the critical path by many) is another
operator, so its curves are left out of the fit (``OperatorProfile.moe_routing``); A100's
``0.14.0`` tables have no balanced rows.

:func:`synthetic_profile` turns a :class:`TransferModel` and a datasheet into an
:class:`~sim.costmodel.profiles.OperatorProfile` holding the curves a model needs (its GEMM
columns, its head shape's attention, its all-reduce, its fused MoE experts),
so the datasheet path runs through exactly the tabulation of measured tables
(:class:`~sim.costmodel.profiled.ProfiledCostModel`). The shipped model, fitted on every profiled
accelerator, is ``data/catalogue/transfer.yaml`` (:func:`default_transfer`); ``placement bench
cost-model`` refits it with one accelerator left out at a time and reports the error on the one
left out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
import yaml

from placement.domain.accelerators import Accelerator
from placement.domain.catalogue_files import shipped_folder
from placement.domain.llm import ModelArchitecture
from placement.errors import InputError
from sim.costmodel.interpolate import FloatArray, gemm_latency_many
from sim.costmodel.operators import MoeShape, ShardShapes, shard_shapes
from sim.costmodel.profiles import BALANCED, Curve, HeadKey, OperatorProfile, ShapeNotProfiled

Family = Literal["gemm", "context_attention", "generation_attention", "communication", "moe"]
FAMILIES: tuple[Family, ...] = (
    "gemm",
    "context_attention",
    "generation_attention",
    "communication",
    "moe",
)
TRANSFER_FILE = "transfer.yaml"

SOL_KNOTS = tuple(float(x) for x in np.arange(-8.0, -1.49, 0.5))  # log10 seconds
SECOND_KNOTS: dict[Family, tuple[float, ...]] = {
    "gemm": tuple(float(x) for x in np.arange(-4.0, 3.01, 1.0)),
    "context_attention": tuple(float(x) for x in np.arange(-2.0, 4.01, 1.0)),
    "generation_attention": tuple(float(x) for x in np.arange(0.0, 3.51, 0.5)),
    "communication": (1.0, 2.0, 3.0),
    "moe": tuple(float(x) for x in np.arange(-4.0, 3.01, 1.0)),
}
# The first axis of the compute families is the SOL in boost-clock cycles, written as seconds at
# this clock; for GEMM in SM-cycles, written as seconds at this clock on
# REFERENCE_COMPUTE_UNITS SMs. An accelerator whose datasheet gives no clock (SM count) is taken
# at the median of the profiled GPUs' (A100 1.41, H100 1.98, B200 1.98, L40S 2.52 GHz; 108, 132,
# 148, 142 SMs).
REFERENCE_CLOCK_GHZ = 1.5
UNKNOWN_CLOCK_GHZ = 1.98
REFERENCE_COMPUTE_UNITS = 100
UNKNOWN_COMPUTE_UNITS = 137
CLOCKED: frozenset[Family] = frozenset({"gemm", "context_attention", "generation_attention", "moe"})
SM_CYCLED: frozenset[Family] = frozenset({"gemm"})
# Exponentials (MUFU.EX2) per SM per clock: the CUDA programming guide's throughput of the
# special functions for compute capability 8.0–9.0 (and FlashAttention-3's 3.9 TFLOPS of special
# functions on H100 SXM5 is 16 × 132 SMs × 1.83 GHz); Blackwell kept the rate.
EXP_PER_SM_CYCLE = 16
SOL_CLOCK = (
    f"compute families: boost-clock cycles as seconds at {REFERENCE_CLOCK_GHZ} GHz, GEMM "
    f"SM-cycles per {REFERENCE_COMPUTE_UNITS} SMs; prefill softmax at {EXP_PER_SM_CYCLE} "
    "exp/SM/clock"
)
SMOOTHNESS = 1.0  # weight of the second-difference penalty, per knot
HUBER_LOG = 0.1  # residuals beyond ~10 % count linearly
IRLS_STEPS = 6
COLUMN_ROUNDS = 4  # surface / GEMM column effects, alternated
COLUMN_PRIOR_GPUS = 1.0  # a column's effect is shrunk by g / (g + this) for g GPUs measuring it
ROWS_PER_FIT = 12_000  # per (accelerator, family): a seeded sample of larger tables
DTYPE_BYTES = 2

# Shapes the synthetic tables are built on (those the measured tables cover).
GEMM_M = tuple(sorted({*(2**i for i in range(16)), *(3 * 2**i for i in range(14)), 32768}))
CONTEXT_BATCHES = (1, 2, 4, 8, 16, 32, 64, 128)
CONTEXT_ISL = (16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
CONTEXT_MAX_TOKENS = 131_072  # batch · isl, as in the measured tables
GENERATION_BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
GENERATION_CONTEXT = tuple(2**i for i in range(1, 18))
GENERATION_MAX_TOKENS = 1 << 24
ALL_REDUCE_BYTES = tuple(float(2**i) for i in range(7, 30))


@dataclass(frozen=True, slots=True)
class Peaks:
    """Datasheet peaks of one accelerator: FLOP/s, HBM bytes/s, interconnect bytes/s per GPU,
    its boost clock (GHz) and its SM (compute unit) count."""

    flops_per_s: float
    hbm_bytes_per_s: float
    link_bytes_per_s: float
    clock_ghz: float = REFERENCE_CLOCK_GHZ
    compute_units: float = REFERENCE_COMPUTE_UNITS

    @classmethod
    def of(cls, accelerator: Accelerator) -> Peaks:
        return cls(
            flops_per_s=accelerator.dense_bf16_tflops * 1e12,
            hbm_bytes_per_s=accelerator.hbm_tbps * 1e12,
            link_bytes_per_s=accelerator.interconnect_gbps * 1e9,
            clock_ghz=accelerator.boost_clock_ghz or UNKNOWN_CLOCK_GHZ,
            compute_units=accelerator.compute_units or UNKNOWN_COMPUTE_UNITS,
        )

    @property
    def clock_ratio(self) -> float:
        """Cycles per second over the reference clock's."""
        return self.clock_ghz / REFERENCE_CLOCK_GHZ

    @property
    def exp_per_s(self) -> float:
        """Exponentials per second of the special-function units."""
        return EXP_PER_SM_CYCLE * self.compute_units * self.clock_ghz * 1e9

    @property
    def sm_cycle_ratio(self) -> float:
        """SM-cycles per second over the reference clock's on the reference SM count."""
        return self.clock_ratio * self.compute_units / REFERENCE_COMPUTE_UNITS


@dataclass(frozen=True, slots=True)
class Sol:
    """Speed of light of a batch of operator calls (s), the surface's second axis, and the
    first axis's units per second over the reference's (SOL in cycles = ``seconds ·
    clock_ratio`` at the reference clock; for the SM-cycled families the ratio counts SM-cycles,
    :attr:`Peaks.sm_cycle_ratio`)."""

    seconds: FloatArray
    second_axis: FloatArray
    clock_ratio: float | FloatArray = 1.0

    def select(self, rows: npt.NDArray[Any]) -> Sol:
        return Sol(self.seconds[rows], self.second_axis[rows], self._ratios()[rows])

    def _ratios(self) -> FloatArray:
        return np.broadcast_to(np.asarray(self.clock_ratio, np.float64), self.seconds.shape)

    @staticmethod
    def concatenate(parts: Sequence[Sol]) -> Sol:
        return Sol(
            np.concatenate([s.seconds for s in parts]),
            np.concatenate([s.second_axis for s in parts]),
            np.concatenate([s._ratios() for s in parts]),
        )


def _axis_ratio(peaks: Peaks, family: Family) -> float:
    """The family's first-axis units (cycles or SM-cycles) per second over the reference's."""
    return peaks.sm_cycle_ratio if family in SM_CYCLED else peaks.clock_ratio


def _balanced(compute: FloatArray, memory: FloatArray, ratio: float) -> Sol:
    return Sol(np.maximum(compute, memory), np.log10(compute / memory), ratio)


def gemm_sol(peaks: Peaks, m: FloatArray, n: FloatArray, k: FloatArray) -> Sol:
    """``[m, k] @ [k, n]`` in BF16: 2mnk FLOPs; reads both operands, writes the result."""
    compute = 2.0 * m * n * k / peaks.flops_per_s
    memory = DTYPE_BYTES * (m * k + k * n + m * n) / peaks.hbm_bytes_per_s
    return _balanced(compute, memory, _axis_ratio(peaks, "gemm"))


def moe_sol(peaks: Peaks, moe: MoeShape, tokens: FloatArray) -> Sol:
    """The fused experts of one MoE layer: each token through ``topk`` experts' three
    ``hidden × inter/tp`` matrices; the weights of every expert some token reaches are read."""
    inter = moe.inter / moe.tp
    touched = moe.num_experts * (1.0 - (1.0 - moe.topk / moe.num_experts) ** tokens)
    compute = 2.0 * tokens * moe.topk * 3.0 * moe.hidden * inter / peaks.flops_per_s
    weights = touched * 3.0 * moe.hidden * inter
    memory = DTYPE_BYTES * (weights + 2.0 * tokens * moe.topk * moe.hidden) / peaks.hbm_bytes_per_s
    return _balanced(compute, memory, _axis_ratio(peaks, "moe"))


def context_attention_sol(peaks: Peaks, batch: FloatArray, isl: FloatArray, head: HeadKey) -> Sol:
    """Causal prefill of ``batch`` sequences of ``isl`` tokens, no cached context: ``isl²/2``
    query–key pairs per head at 4 FLOPs per pair and dimension on the tensor cores, and one
    exponential per pair (the softmax) on the SMs' special-function units, whichever takes
    longer; Q, K, V read, O written once."""
    heads, kv_heads, head_dim = head
    matmul = 2.0 * batch * heads * head_dim * isl * isl / peaks.flops_per_s
    compute = np.maximum(matmul, batch * heads * isl * isl / 2.0 / peaks.exp_per_s)
    memory = (
        DTYPE_BYTES
        * batch
        * isl
        * head_dim
        * (2.0 * heads + 2.0 * kv_heads)
        / peaks.hbm_bytes_per_s
    )
    return _balanced(compute, memory, _axis_ratio(peaks, "context_attention"))


def generation_attention_sol(
    peaks: Peaks, batch: FloatArray, context: FloatArray, head: HeadKey
) -> Sol:
    """One decode step of ``batch`` sequences over ``context`` cached tokens each: the K and V
    of every context token read once (compute is far below it)."""
    heads, kv_heads, head_dim = head
    memory = (
        DTYPE_BYTES
        * batch
        * (2.0 * context * kv_heads * head_dim + 2.0 * heads * head_dim)
        / peaks.hbm_bytes_per_s
    )
    compute = 4.0 * batch * heads * head_dim * context / peaks.flops_per_s
    return Sol(
        np.maximum(compute, memory), np.log10(batch), _axis_ratio(peaks, "generation_attention")
    )


def all_reduce_sol(peaks: Peaks, gpus: FloatArray, message_bytes: FloatArray) -> Sol:
    """Ring all-reduce: each GPU sends and receives ``2·(n−1)/n`` of the message."""
    seconds = 2.0 * (gpus - 1.0) / gpus * message_bytes / peaks.link_bytes_per_s
    return Sol(seconds, np.log2(gpus))


# ---------------------------------------------------------------------------------------------
# The surface


def _hat(values: FloatArray, knots: FloatArray) -> tuple[npt.NDArray[np.int64], FloatArray]:
    """Left knot index and weight of the right knot, values clamped to the knot range."""
    v = np.clip(values, knots[0], knots[-1])
    i = np.clip(np.searchsorted(knots, v, side="right") - 1, 0, len(knots) - 2).astype(np.int64)
    w = np.asarray((v - knots[i]) / (knots[i + 1] - knots[i]), dtype=np.float64)
    return i, w


def _basis(family: Family, sol: Sol) -> tuple[npt.NDArray[np.int64], FloatArray]:
    """Bilinear weights of each row on the (SOL, second axis) knot grid: the four knots'
    flat indices and weights, ``[rows, 4]`` each."""
    xk, yk = np.asarray(SOL_KNOTS), np.asarray(SECOND_KNOTS[family])
    cycles = sol.seconds * sol.clock_ratio if family in CLOCKED else sol.seconds
    ix, wx = _hat(np.log10(np.maximum(cycles, 1e-30)), xk)
    iy, wy = _hat(sol.second_axis, yk)
    ny = len(yk)
    index = np.stack([ix * ny + iy, ix * ny + iy + 1, (ix + 1) * ny + iy, (ix + 1) * ny + iy + 1])
    weight = np.stack([(1 - wx) * (1 - wy), (1 - wx) * wy, wx * (1 - wy), wx * wy])
    return index.T.astype(np.int64), np.asarray(weight.T, dtype=np.float64)


def _evaluate(family: Family, sol: Sol, coef: FloatArray) -> FloatArray:
    index, weight = _basis(family, sol)
    return np.asarray((coef[index] * weight).sum(axis=1), dtype=np.float64)


def _normal_equations(
    family: Family, sol: Sol, y: FloatArray, w: FloatArray
) -> tuple[FloatArray, FloatArray]:
    """``XᵀWX`` and ``XᵀWy`` of the bilinear basis, accumulated sparsely (4 knots a row)."""
    index, weight = _basis(family, sol)
    size = len(SOL_KNOTS) * len(SECOND_KNOTS[family])
    pairs = (index[:, :, None] * size + index[:, None, :]).ravel()
    values = (weight[:, :, None] * weight[:, None, :] * w[:, None, None]).ravel()
    xtx = np.bincount(pairs, weights=values, minlength=size * size).reshape(size, size)
    xty = np.bincount(index.ravel(), weights=(weight * (w * y)[:, None]).ravel(), minlength=size)
    return np.asarray(xtx, dtype=np.float64), np.asarray(xty, dtype=np.float64)


def _penalty(family: Family) -> FloatArray:
    nx, ny = len(SOL_KNOTS), len(SECOND_KNOTS[family])
    rows: list[FloatArray] = []
    for i in range(nx):
        for j in range(ny):
            for di, dj in ((1, 0), (0, 1)):
                if i + 2 * di < nx and j + 2 * dj < ny:
                    r = np.zeros(nx * ny)
                    r[i * ny + j] += 1.0
                    r[(i + di) * ny + j + dj] -= 2.0
                    r[(i + 2 * di) * ny + j + 2 * dj] += 1.0
                    rows.append(r)
    return np.vstack([np.vstack(rows) * SMOOTHNESS, np.eye(nx * ny) * 1e-3])


@dataclass(frozen=True, slots=True, kw_only=True)
class Surface:
    """``log(latency / SOL)`` of one family on the knot grid (``values[i][j]``: SOL knot ``i``,
    second-axis knot ``j``)."""

    family: Family
    values: tuple[tuple[float, ...], ...]
    median_ape: float  # on the rows it was fitted on
    rows: int

    def log_ratio(self, sol: Sol) -> FloatArray:
        return _evaluate(self.family, sol, np.asarray(self.values, dtype=np.float64).ravel())

    def latency(self, sol: Sol) -> FloatArray:
        """Predicted latency (s) of each call."""
        return np.asarray(sol.seconds * np.exp(self.log_ratio(sol)), dtype=np.float64)


Column = tuple[int, int]  # a GEMM's weight shape (n, k)


@dataclass(frozen=True, slots=True)
class Observations:
    """Measured calls of one family on one accelerator: their SOL and latency (s); for GEMMs
    each call's column ``(n, k)`` (``[rows, 2]``); ``skewed`` marks calls measured under a
    condition the surfaces do not model (MoE under skewed routing), reported but not fitted."""

    sol: Sol
    latency: FloatArray
    columns: npt.NDArray[np.int64] | None = None
    skewed: npt.NDArray[np.bool_] | None = None

    def select(self, rows: npt.NDArray[Any]) -> Observations:
        columns = None if self.columns is None else self.columns[rows]
        skewed = None if self.skewed is None else self.skewed[rows]
        return Observations(self.sol.select(rows), self.latency[rows], columns, skewed)

    def fitted(self) -> Observations:
        """The calls a surface learns from (all but the skewed ones)."""
        return self if self.skewed is None else self.select(~self.skewed)

    def sample(self, limit: int, seed: int = 0) -> Observations:
        n = len(self.latency)
        if n <= limit:
            return self
        return self.select(np.sort(np.random.default_rng(seed).choice(n, limit, replace=False)))

    def scaled(self, factor: FloatArray) -> Observations:
        """The same calls with every latency multiplied by ``factor``."""
        return Observations(self.sol, self.latency * factor, self.columns, self.skewed)


def fit_surface(family: Family, per_accelerator: Sequence[Observations]) -> Surface:
    """The smooth surface closest (Huber on log-ratios) to every accelerator's calls, each
    accelerator weighted equally whatever its table size."""
    parts = [o.fitted().sample(ROWS_PER_FIT) for o in per_accelerator]
    parts = [o for o in parts if len(o.latency)]
    if not parts:
        raise InputError(f"no measured {family} calls to fit on", field=family)
    sol = Sol.concatenate([o.sol for o in parts])
    y = np.concatenate([np.log(o.latency / o.sol.seconds) for o in parts])
    w = np.concatenate([np.full(len(o.latency), 1.0 / len(o.latency)) for o in parts])
    w *= len(w) / w.sum()
    penalty = _penalty(family)
    ptp = penalty.T @ penalty
    coef: FloatArray = np.zeros(len(SOL_KNOTS) * len(SECOND_KNOTS[family]))
    for _ in range(IRLS_STEPS):
        r = np.abs(y - _evaluate(family, sol, coef))
        ww = w * np.where(r < HUBER_LOG, 1.0, HUBER_LOG / np.maximum(r, 1e-12))
        xtx, xty = _normal_equations(family, sol, y, ww)
        coef = np.asarray(np.linalg.solve(xtx + ptp, xty), dtype=np.float64)
    ape = np.abs(np.exp(_evaluate(family, sol, coef) - y) - 1.0)
    ny = len(SECOND_KNOTS[family])
    values = tuple(
        tuple(float(v) for v in coef[i * ny : (i + 1) * ny]) for i in range(len(SOL_KNOTS))
    )
    return Surface(family=family, values=values, median_ape=float(np.median(ape)), rows=len(y))


def _column_effects(surface: Surface, parts: Sequence[Observations]) -> dict[Column, float]:
    """Per GEMM column: the median over GPUs of each GPU's median log residual to ``surface``,
    less the median of that over every column (0 is the typical column, what a column no GPU
    measured is taken to be), shrunk by ``g / (g + COLUMN_PRIOR_GPUS)`` for the ``g`` GPUs that
    measured it."""
    per_gpu: dict[Column, list[float]] = {}
    for part in parts:
        if part.columns is None:
            continue
        residual = np.log(part.latency / part.sol.seconds) - surface.log_ratio(part.sol)
        codes, inverse = np.unique(part.columns, axis=0, return_inverse=True)
        inverse = np.asarray(inverse).ravel()
        order = np.argsort(inverse, kind="stable")
        bounds = np.searchsorted(inverse[order], np.arange(len(codes) + 1))
        for j, (n, k) in enumerate(codes.tolist()):
            rows = order[bounds[j] : bounds[j + 1]]
            per_gpu.setdefault((int(n), int(k)), []).append(float(np.median(residual[rows])))
    raw = {column: float(np.median(values)) for column, values in per_gpu.items()}
    typical = float(np.median(list(raw.values()))) if raw else 0.0
    return {
        column: (raw[column] - typical) * len(values) / (len(values) + COLUMN_PRIOR_GPUS)
        for column, values in per_gpu.items()
    }


def _effects_of(effects: Mapping[Column, float], columns: npt.NDArray[np.int64]) -> FloatArray:
    return np.asarray([effects.get((int(n), int(k)), 0.0) for n, k in columns], np.float64)


def fit_gemm(per_accelerator: Sequence[Observations]) -> tuple[Surface, dict[Column, float]]:
    """The GEMM surface and the column effects, fitted jointly (alternating)."""
    parts = [o for o in per_accelerator if len(o.latency)]  # fit_surface samples each
    effects: dict[Column, float] = {}
    surface = fit_surface("gemm", parts)
    for _ in range(COLUMN_ROUNDS - 1):
        effects = _column_effects(surface, parts)
        surface = fit_surface(
            "gemm",
            [
                p if p.columns is None else p.scaled(np.exp(-_effects_of(effects, p.columns)))
                for p in parts
            ],
        )
    return surface, _column_effects(surface, parts)


@dataclass(frozen=True, slots=True, kw_only=True)
class TransferModel:
    """One surface per family, the GEMM column effects (log, added to the surface) and the
    accelerators they were learned on."""

    surfaces: Mapping[Family, Surface]
    fitted_on: tuple[str, ...]
    gemm_columns: Mapping[Column, float] = field(default_factory=dict)

    def latency(self, family: Family, sol: Sol) -> FloatArray:
        """Predicted latency (s) of calls known by their SOL only (no column effect)."""
        return self.surfaces[family].latency(sol)

    def predict(self, family: Family, calls: Observations) -> FloatArray:
        """Predicted latency (s) of ``calls``, with their GEMM columns' effects."""
        latency = self.latency(family, calls.sol)
        if family != "gemm" or calls.columns is None or not self.gemm_columns:
            return latency
        return np.asarray(latency * np.exp(_effects_of(self.gemm_columns, calls.columns)))

    def column_effect(self, n: int, k: int) -> float:
        """Log effect of the GEMM column ``(n, k)``; 0 for a column no GPU measured."""
        return self.gemm_columns.get((n, k), 0.0)

    def to_dict(self) -> dict[str, Any]:
        return {
            "fitted_on": list(self.fitted_on),
            "sol_knots_log10_s": list(SOL_KNOTS),
            "sol_clock": SOL_CLOCK,
            "surfaces": {
                f: {
                    "second_knots": list(SECOND_KNOTS[f]),
                    "median_ape_in_sample": round(s.median_ape, 4),
                    "rows": s.rows,
                    "log_latency_over_sol": [[round(v, 5) for v in row] for row in s.values],
                }
                for f, s in self.surfaces.items()
            },
            "gemm_column_effects": [
                [n, k, round(v, 5)] for (n, k), v in sorted(self.gemm_columns.items())
            ],
        }

    @classmethod
    def from_dict(cls, raw: Any, *, source: str = "<transfer>") -> TransferModel:
        try:
            surfaces: dict[Family, Surface] = {}
            if list(raw["sol_knots_log10_s"]) != list(SOL_KNOTS):
                raise InputError("knots differ from this version's", source=source)
            if raw.get("sol_clock") != SOL_CLOCK:
                raise InputError(
                    f"SOL axis is not this version's ({SOL_CLOCK}): refit it",
                    source=source,
                    field="sol_clock",
                )
            for family in FAMILIES:
                s = raw["surfaces"][family]
                if list(s["second_knots"]) != list(SECOND_KNOTS[family]):
                    raise InputError(
                        "knots differ", source=source, field=f"surfaces.{family}.second_knots"
                    )
                values = tuple(tuple(float(v) for v in row) for row in s["log_latency_over_sol"])
                if len(values) != len(SOL_KNOTS) or any(
                    len(row) != len(SECOND_KNOTS[family]) for row in values
                ):
                    raise InputError(
                        "wrong grid size",
                        source=source,
                        field=f"surfaces.{family}.log_latency_over_sol",
                    )
                surfaces[family] = Surface(
                    family=family,
                    values=values,
                    median_ape=float(s["median_ape_in_sample"]),
                    rows=int(s["rows"]),
                )
            columns = {
                (int(n), int(k)): float(v) for n, k, v in raw.get("gemm_column_effects") or []
            }
            return cls(
                surfaces=surfaces,
                fitted_on=tuple(str(a) for a in raw["fitted_on"]),
                gemm_columns=columns,
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(f"not a transfer model ({exc})", source=source) from None


def transfer_path() -> Path:
    return shipped_folder() / TRANSFER_FILE


def save_transfer(model: TransferModel, path: Path, *, command: str) -> None:
    header = (
        "# Utilization surfaces of the datasheet fallback (sim/costmodel/transfer.py), fitted on\n"
        f"# the operator tables of {', '.join(model.fitted_on)}. Written by: {command}\n"
    )
    path.write_text(header + yaml.safe_dump(model.to_dict(), sort_keys=False, width=100))


@cache
def _load(path: Path) -> TransferModel:
    try:
        raw = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise InputError(f"cannot read ({exc})", source=str(path)) from None
    return TransferModel.from_dict(raw, source=str(path))


def default_transfer() -> TransferModel:
    """The shipped surfaces (fitted on every profiled accelerator)."""
    return _load(transfer_path())


# ---------------------------------------------------------------------------------------------
# Measured calls of a profile, and a profile synthesised from a datasheet


def _arrays(pairs: Iterable[tuple[float, ...]]) -> list[FloatArray]:
    cols = list(zip(*pairs, strict=True))
    return [np.asarray(c, dtype=np.float64) for c in cols]


def observations(accelerator: Accelerator, profile: OperatorProfile) -> dict[Family, Observations]:
    """Every measured call of ``profile`` per family, with its SOL on ``accelerator``."""
    peaks = Peaks.of(accelerator)
    out: dict[Family, Observations] = {}
    rows = [
        (m, n, k, y) for (n, k), c in profile.gemm.items() for m, y in zip(c.xs, c.ys, strict=True)
    ]
    if rows:
        m, n, k, y = _arrays(rows)
        columns = np.stack([n, k], axis=1).astype(np.int64)
        out["gemm"] = Observations(gemm_sol(peaks, m, n, k), y, columns)
    for family, table in (
        ("context_attention", profile.context_attention),
        ("generation_attention", profile.generation_attention),
    ):
        sols: list[Sol] = []
        ys: list[FloatArray] = []
        for head, curves in table.items():
            for batch, c in curves.items():
                xs = np.asarray(c.xs)
                b = np.full_like(xs, float(batch))
                sol = (
                    context_attention_sol(peaks, b, xs, head)
                    if family == "context_attention"
                    else generation_attention_sol(peaks, b, xs, head)
                )
                sols.append(sol)
                ys.append(np.asarray(c.ys))
        if sols:
            out[family] = Observations(  # type: ignore[index]
                Sol.concatenate(sols), np.concatenate(ys)
            )
    comm = [
        (float(g), x, y)
        for g, c in profile.all_reduce.items()
        for x, y in zip(c.xs, c.ys, strict=True)
    ]
    if comm:
        g, size, y = _arrays(comm)
        out["communication"] = Observations(all_reduce_sol(peaks, g, size), y)
    moe = [
        (
            moe_sol(peaks, _moe_shape(key), np.asarray(c.xs, dtype=np.float64)),
            np.asarray(c.ys),
            np.full(len(c.xs), profile.moe_routing.get(key, BALANCED) != BALANCED),
        )
        for key, c in profile.moe.items()
    ]
    if moe:
        out["moe"] = Observations(
            Sol.concatenate([sol for sol, _, _ in moe]),
            np.concatenate([y for _, y, _ in moe]),
            skewed=np.concatenate([skewed for _, _, skewed in moe]),
        )
    return out


def _moe_shape(key: tuple[int, int, int, int, int]) -> MoeShape:
    hidden, inter, topk, num_experts, tp = key
    return MoeShape(hidden=hidden, inter=inter, topk=topk, num_experts=num_experts, tp=tp)


def fit_transfer(
    measured: Mapping[str, Mapping[Family, Observations]],
) -> TransferModel:
    """Surfaces learned on the calls of every accelerator in ``measured`` (name → family →
    calls), GEMM jointly with its column effects; a family no accelerator measured cannot be
    fitted."""
    gemm, columns = fit_gemm([m["gemm"] for m in measured.values() if "gemm" in m])
    surfaces = {
        family: gemm
        if family == "gemm"
        else fit_surface(family, [m[family] for m in measured.values() if family in m])
        for family in FAMILIES
    }
    return TransferModel(surfaces=surfaces, fitted_on=tuple(sorted(measured)), gemm_columns=columns)


def _curve(xs: Sequence[float], ys: FloatArray) -> Curve:
    return Curve(xs=tuple(float(x) for x in xs), ys=tuple(float(y) for y in ys))


def _measured_gemm(
    measured: OperatorProfile | None, m: FloatArray, n: int, k: int
) -> FloatArray | None:
    if measured is None:
        return None
    try:
        return gemm_latency_many(measured, m, n, k)
    except ShapeNotProfiled:
        return None


def synthetic_profile(
    accelerator: Accelerator,
    model: ModelArchitecture,
    tp: int,
    transfer: TransferModel,
    measured: OperatorProfile | None = None,
) -> OperatorProfile:
    """The tables a measured profile would hold for ``model`` on ``tp`` GPUs of
    ``accelerator``, predicted from its datasheet by ``transfer`` — except what ``measured``
    (the accelerator's own tables, when it has some) covers, which is kept. ``predicted`` on
    the result lists the operators that came from the datasheet."""
    peaks = Peaks.of(accelerator)
    shapes: ShardShapes = shard_shapes(model, tp)
    m = np.asarray(GEMM_M, dtype=np.float64)
    predicted: list[str] = []
    gemm: dict[tuple[int, int], Curve] = {}
    for g in (*shapes.layer_gemms, shapes.lm_head):
        ys = _measured_gemm(measured, m, g.n, g.k)
        if ys is None:
            n, k = np.full_like(m, float(g.n)), np.full_like(m, float(g.k))
            ys = transfer.latency("gemm", gemm_sol(peaks, m, n, k))
            ys = ys * np.exp(transfer.column_effect(g.n, g.k))
            predicted.append(f"GEMM {g.name}")
        gemm[(g.n, g.k)] = _curve(GEMM_M, ys)
    head = shapes.head_key
    context = None if measured is None else measured.context_attention.get(head)
    if context is None:
        predicted.append("context attention")
        context = {}
        for b in CONTEXT_BATCHES:
            isl = np.asarray([s for s in CONTEXT_ISL if b * s <= CONTEXT_MAX_TOKENS], np.float64)
            sol = context_attention_sol(peaks, np.full_like(isl, float(b)), isl, head)
            context[b] = _curve(isl.tolist(), transfer.latency("context_attention", sol))
    generation = None if measured is None else measured.generation_attention.get(head)
    if generation is None:
        predicted.append("generation attention")
        generation = {}
        for b in GENERATION_BATCHES:
            ctx = np.asarray(
                [c for c in GENERATION_CONTEXT if b * c <= GENERATION_MAX_TOKENS], np.float64
            )
            sol = generation_attention_sol(peaks, np.full_like(ctx, float(b)), ctx, head)
            generation[b] = _curve(ctx.tolist(), transfer.latency("generation_attention", sol))
    all_reduce: dict[int, Curve] = {}
    if tp > 1:
        kept = None if measured is None else measured.all_reduce.get(tp)
        if kept is None:
            predicted.append("all-reduce")
            size = np.asarray(ALL_REDUCE_BYTES)
            sol = all_reduce_sol(peaks, np.full_like(size, float(tp)), size)
            kept = _curve(ALL_REDUCE_BYTES, transfer.latency("communication", sol))
        all_reduce[tp] = kept
    moe: dict[tuple[int, int, int, int, int], Curve] = {}
    if shapes.moe is not None:
        curve = None if measured is None else measured.moe.get(shapes.moe.key)
        if curve is None:
            predicted.append("MoE experts")
            curve = _curve(GEMM_M, transfer.latency("moe", moe_sol(peaks, shapes.moe, m)))
        moe[shapes.moe.key] = curve
    source = "datasheet" if measured is None else f"'{measured.name}' + datasheet"
    return OperatorProfile(
        name=f"{accelerator.kind} ({source}, learned on {', '.join(transfer.fitted_on)})",
        version="transfer",
        gemm=gemm,
        gemm_ns=tuple(sorted({n for n, _ in gemm})),
        gemm_ks=tuple(sorted({k for _, k in gemm})),
        context_attention={shapes.head_key: context},
        generation_attention={shapes.head_key: generation},
        all_reduce=all_reduce,
        moe=moe,
        predicted=tuple(predicted),
    )


def profiled_observations(
    accelerators: Iterable[Accelerator],
) -> dict[str, dict[Family, Observations]]:
    """Measured calls of every accelerator whose operator tables can be found."""
    from sim.costmodel.profiles import find_profile, load_profile

    out: dict[str, dict[Family, Observations]] = {}
    for accelerator in accelerators:
        if accelerator.profile is None or find_profile(accelerator.profile) is None:
            continue
        out[accelerator.kind] = observations(accelerator, load_profile(accelerator.profile))
    return out
