"""The iteration-time model built from measured operator tables (vLLM on real GPUs).

Everything is tabulated at construction so the simulator's calls are list lookups:

- ``linear_s(m)`` for every ``m`` in ``1..max_tokens``: the per-layer GEMMs (+ MoE, + two
  all-reduces when ``tp > 1``) times the layer count, plus the LM head (see
  :mod:`sim.costmodel.operators`), made non-decreasing in ``m`` by :func:`padded_envelope`.
  Above ``max_tokens`` it grows linearly.
- prefill attention of one chunk of ``c`` tokens over ``p`` cached tokens, per layer::

      a·c + b·c·(p + c/2)

  (``c·(p + c/2)`` is the number of causal query–key pairs), with ``a, b`` fitted on the
  ``context_attention`` table (all batch sizes, ``B`` sequences of ``isl`` tokens) together with
  a per-call constant ``f``: ``latency ≈ f + a·B·isl + b·B·isl²/2``, least squares on relative
  error. The table has no cached context; the model assumes a cached key costs what an in-chunk
  key costs.
- decode attention of ``n`` sequences with summed context ``C``, per layer ``d0(n) + d1(n)·C``,
  fitted by least squares (relative error) on the ``generation_attention`` rows of each measured
  batch size, interpolated linearly in ``n`` between them and tabulated for ``n ≤ max_decode_seqs``.
  Where a batch size's rows barely leave the launch-bound floor (the largest batches are only
  measured at short contexts), its slope is not identifiable; it borrows the slope of the nearest
  smaller batch size.
- The attention kernel's per-call constant ``f`` is paid once per layer per iteration (vLLM runs
  prefill chunks and decodes in one attention call), so it is moved out of the per-chunk and
  per-decode terms into ``overhead_s``.

``overhead_s = framework_overhead_s + layers·f``. ``framework_overhead_s`` is the host-side
cost of an iteration that no operator table measures (scheduling, input preparation, sampling,
launch gaps); see :data:`FRAMEWORK_OVERHEAD_S` for where its value comes from.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from placement.domain.accelerators import Accelerator
from placement.domain.llm import ModelArchitecture
from placement.errors import ProfileUnavailable
from sim.costmodel.interpolate import FloatArray
from sim.costmodel.operators import (
    context_attention_curves,
    generation_attention_curves,
    profiled_linear_many,
    shard_shapes,
)
from sim.costmodel.profiles import Curve, OperatorProfile, load_profile
from sim.costmodel.stack import StackCalibration, calibrate_tables
from sim.costmodel.tabulated import TabulatedCostModel

MAX_TOKENS = 32768 + 512
MAX_DECODE_SEQS = 4096
# A batch size's decode slope is trusted when its slowest row is at least this many times its
# fastest (the rows reach the bandwidth-bound regime); otherwise it borrows a neighbour's slope.
DECODE_SLOPE_MIN_SPREAD = 3.0

# Host-side time per engine iteration that the operator tables do not see (scheduling, input
# preparation, sampling, launch gaps). Calibrated on measured vLLM end-to-end latencies: the
# calibration half (batch sizes <= 16) of the LLM-Inference-Bench vLLM rows on A100 and H100
# (Llama-3-8B TP1/2/4, Llama-2-70B TP4, Mixtral-8x7B TP4), by
# sim.costmodel.validate.calibrate_framework_overhead (3.61 ms); the other half (batch 32, 64)
# is what `placement bench cost-model` reports. That vLLM was a 2024 release, older than the
# kernel tables (vLLM 0.14 on A100, 0.24 elsewhere); newer engines overlap more host work.
FRAMEWORK_OVERHEAD_S = 3.6e-3


@dataclass(frozen=True, slots=True, kw_only=True)
class PrefillAttentionFit:
    """Per-layer prefill attention: ``fixed_s + per_token_s·tokens + per_pair_s·pairs``."""

    fixed_s: float
    per_token_s: float
    per_pair_s: float
    median_ape: float


@dataclass(frozen=True, slots=True, kw_only=True)
class DecodeAttentionFit:
    """Per-layer decode attention ``fixed_s[i] + per_context_token_s[i]·C`` per batch size.

    Index ``i`` runs over ``batch_sizes``; ``C`` is the context summed over the sequences.
    """

    batch_sizes: tuple[int, ...]
    fixed_s: tuple[float, ...]
    per_context_token_s: tuple[float, ...]
    median_ape: float


def _weighted_nnls(x: FloatArray, y: FloatArray) -> FloatArray:
    """Non-negative least squares on relative error (each row weighted by ``1/y``)."""
    from scipy.optimize import nnls  # scipy.optimize alone costs ~0.6 s to import

    w = 1.0 / y
    coef, _ = nnls(x * w[:, None], y * w)
    return np.asarray(coef, dtype=np.float64)


def fit_prefill_attention(curves: dict[int, Curve]) -> PrefillAttentionFit:
    """Fit ``f + a·B·isl + b·B·isl²/2`` to the context-attention curves of one head shape."""
    batch: list[float] = []
    isl: list[float] = []
    latency: list[float] = []
    for b, curve in curves.items():
        batch.extend([float(b)] * len(curve.xs))
        isl.extend(curve.xs)
        latency.extend(curve.ys)
    bs, s, y = (np.asarray(v, dtype=np.float64) for v in (batch, isl, latency))
    x = np.stack([np.ones_like(bs), bs * s, bs * s * s / 2.0], axis=1)
    coef = _weighted_nnls(x, y)
    ape = np.abs(x @ coef / y - 1.0)
    return PrefillAttentionFit(
        fixed_s=float(coef[0]),
        per_token_s=float(coef[1]),
        per_pair_s=float(coef[2]),
        median_ape=float(np.median(ape)),
    )


def _affine(n: int, curve: Curve, slope: float | None) -> tuple[float, float]:
    """(d0, d1) for ``n`` sequences: free fit, or ``d0`` alone when ``slope`` is given."""
    summed = n * np.asarray(curve.xs, dtype=np.float64)
    y = np.asarray(curve.ys, dtype=np.float64)
    if slope is None:
        d0, d1 = _weighted_nnls(np.stack([np.ones_like(summed), summed], axis=1), y)
        return float(d0), float(d1)
    w2 = 1.0 / (y * y)
    d0 = float(np.sum((y - slope * summed) * w2) / np.sum(w2))
    return max(0.0, d0), slope


def fit_decode_attention(curves: dict[int, Curve]) -> DecodeAttentionFit:
    """Fit ``d0 + d1·(n·context)`` for every measured batch size ``n`` of one head shape."""
    sizes = sorted(curves)
    identifiable = [max(curves[n].ys) >= DECODE_SLOPE_MIN_SPREAD * min(curves[n].ys) for n in sizes]
    if not any(identifiable):
        identifiable = [True] * len(sizes)
    coeffs: list[tuple[float, float]] = []
    for i, n in enumerate(sizes):
        slope = None
        if not identifiable[i]:
            donors = [j for j in range(len(sizes)) if identifiable[j]]
            donor = max((j for j in donors if j < i), default=min(donors))
            slope = _affine(sizes[donor], curves[sizes[donor]], None)[1]
        coeffs.append(_affine(n, curves[n], slope))
    apes: list[float] = []
    for n, (d0, d1) in zip(sizes, coeffs, strict=True):
        curve = curves[n]
        apes.extend(
            abs((d0 + d1 * n * x) / y - 1.0) for x, y in zip(curve.xs, curve.ys, strict=True)
        )
    return DecodeAttentionFit(
        batch_sizes=tuple(sizes),
        fixed_s=tuple(c[0] for c in coeffs),
        per_context_token_s=tuple(c[1] for c in coeffs),
        median_ape=float(np.median(apes)),
    )


def tabulate_decode(fit: DecodeAttentionFit, max_seqs: int) -> tuple[FloatArray, FloatArray]:
    """Per-layer (d0, d1) for ``n = 0..max_seqs``: linear in ``n`` between measured sizes.

    ``n = 0`` costs nothing; below the smallest measured size the coefficients are held; above
    the largest, ``d0`` grows in proportion to ``n`` and ``d1`` is held.
    """
    n = np.arange(max_seqs + 1, dtype=np.float64)
    sizes = np.asarray(fit.batch_sizes, dtype=np.float64)
    d0 = np.interp(n, sizes, np.asarray(fit.fixed_s))
    d1 = np.interp(n, sizes, np.asarray(fit.per_context_token_s))
    above = n > sizes[-1]
    d0[above] = fit.fixed_s[-1] * n[above] / sizes[-1]
    d0[0] = 0.0
    d1[0] = 0.0
    return d0, d1


def padded_envelope(times: FloatArray) -> FloatArray:
    """``t[m] = min(t[m:])``: never charge more for ``m`` tokens than for a larger batch.

    Measured kernel latencies are not monotone in ``m`` (the library picks another tile at some
    sizes, and timings are noisy); an engine can always pad ``m`` up to the faster size, as vLLM
    does to reuse CUDA graphs. The envelope keeps measured values where they are monotone.
    """
    return np.minimum.accumulate(times[::-1])[::-1]


class ProfiledCostModel(TabulatedCostModel):
    """:class:`~sim.costmodel.base.IterationCostModel` from the measured vLLM operator tables.

    Construction loads the accelerator's tables (cached per process; or takes ``profile``, e.g.
    one synthesised from a datasheet) and tabulates every term; all methods are then list
    lookups and a few float operations. Raises :class:`~placement.errors.ProfileUnavailable` (or
    its subclass ``ShapeNotProfiled``) when the accelerator has no tables or the tables miss one
    of the model's shapes.
    """

    def __init__(
        self,
        accelerator: Accelerator,
        model: ModelArchitecture,
        tp: int,
        *,
        profile: OperatorProfile | None = None,
        stack: StackCalibration | None = None,
        calibrated_on: str = "",
        framework_overhead_s: float = FRAMEWORK_OVERHEAD_S,
        max_tokens: int = MAX_TOKENS,
        max_decode_seqs: int = MAX_DECODE_SEQS,
    ) -> None:
        if profile is None:
            if accelerator.profile is None:
                raise ProfileUnavailable(
                    f"accelerator '{accelerator.kind}' has no measured profile"
                )
            profile = load_profile(accelerator.profile)
        shapes = shard_shapes(model, tp)
        self.accelerator = accelerator
        self.model = model
        self.tp = tp
        self.profile_version = profile.version
        self.profile_predicted = profile.predicted

        tokens = np.arange(1, max_tokens + 1, dtype=np.float64)
        linear = padded_envelope(profiled_linear_many(profile, shapes, tokens))
        self._linear: list[float] = [0.0, *linear.tolist()]
        self._max_tokens = max_tokens

        layers = model.layers
        self.prefill_fit = fit_prefill_attention(context_attention_curves(profile, shapes))
        self.decode_fit = fit_decode_attention(generation_attention_curves(profile, shapes))
        fixed = self.prefill_fit.fixed_s
        self._per_token = layers * self.prefill_fit.per_token_s
        self._per_pair = layers * self.prefill_fit.per_pair_s
        d0, d1 = tabulate_decode(self.decode_fit, max_decode_seqs)
        d0 = layers * np.maximum(d0 - fixed, 0.0)
        d0[0] = 0.0
        self._decode: list[tuple[float, float]] = list(
            zip(d0.tolist(), (layers * d1).tolist(), strict=True)
        )
        self._max_seqs = max_decode_seqs

        self.framework_overhead_s = framework_overhead_s
        self.attention_fixed_s = layers * fixed
        self.overhead_s = framework_overhead_s + self.attention_fixed_s
        self._per_chunk = 0.0
        self.stack = stack
        self.calibrated_on = calibrated_on if stack is not None else ""
        if stack is not None:
            calibrate_tables(self, stack)

    def prefill_attention_s(self, chunk_tokens: int, context_tokens: int) -> float:
        """Causal attention of one chunk over its cached context, all layers (s), plus the
        serving stack's per-chunk cost when calibrated."""
        return (
            chunk_tokens
            * (self._per_token + self._per_pair * (context_tokens + 0.5 * chunk_tokens))
            + self._per_chunk
        )
