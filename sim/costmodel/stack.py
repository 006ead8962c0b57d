"""Serving-stack calibration: run the vLLM-measured kernels under another engine's software.

The operator tables were measured under vLLM. Another serving stack on the same GPUs runs the same
math with different software: its own host loop, its own all-reduce library, its own kernels. A
:class:`StackCalibration` describes that difference with four physical parameters:

- ``host_overhead_s``: host time per engine iteration (scheduling, input preparation, sampling,
  launch gaps). It **replaces** the vLLM framework overhead of the base model.
- ``all_reduce_hop_latency_s``: latency the stack's all-reduce adds per call and per ring hop
  (a ring over ``tp`` GPUs has ``tp - 1`` hops), on top of the table's all-reduce (vLLM's custom
  all-reduce, a few µs). Charged ``2`` calls per layer (after attention and after the MLP), every
  iteration with ``tp > 1``.
- ``compute_factor``: multiplies the throughput-bound kernel time, i.e. what the tables charge
  above the one-token floor of the token-linear work (``linear_s(m) - linear_s(1)``: the GEMM
  compute and all-reduce volume that grow with tokens, while the floor is the weight read, set
  by memory bandwidth) and the whole prefill attention. ``> 1`` means less efficient kernels.
  Decode attention (memory-bound) is unchanged.
- ``prefill_sequence_s``: a fixed cost per prefill chunk (per sequence in a batched prefill):
  per-sequence input preparation, attention metadata and first-token sampling.

:class:`CalibratedCostModel` applies a calibration to a base model and keeps the
:class:`~sim.costmodel.base.IterationCostModel` structure (in particular decode attention stays
affine in the summed context). Every prediction is affine in the four parameters, so
:func:`stack_sensitivities` gets its exact coefficients by finite differences and
:func:`fit_stack_calibration` fits them with ``scipy.optimize.least_squares`` on log-ratios.

The simulator's default cost model is unchanged (vLLM-calibrated); this is an option and a
validation tool.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields, replace
from typing import Protocol

import numpy as np
from scipy.optimize import least_squares

from placement.domain.llm import ModelArchitecture
from placement.errors import InputError
from sim.costmodel.base import IterationCostModel
from sim.costmodel.interpolate import FloatArray
from sim.costmodel.operators import ALL_REDUCES_PER_LAYER

# Robust loss scale of the fit, on log(predicted / measured): residuals beyond ~10 % count
# linearly (soft L1) instead of quadratically, so a few broken measurements cannot dominate.
ROBUST_LOG_SCALE = 0.1
COMPUTE_FACTOR_BOUNDS = (0.5, 2.0)


class KernelCostModel(IterationCostModel, Protocol):
    """A base model that knows its replica shape and its own host overhead (e.g. profiled)."""

    @property
    def model(self) -> ModelArchitecture: ...

    @property
    def tp(self) -> int: ...

    @property
    def framework_overhead_s(self) -> float: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class StackCalibration:
    """How a serving stack differs from the one the operator tables were measured under.

    The defaults are the neutral stack: no host overhead, no added all-reduce latency, the
    tables' kernel efficiency, no per-sequence prefill cost. Field meanings and units: see the
    module docstring.
    """

    host_overhead_s: float = 0.0
    all_reduce_hop_latency_s: float = 0.0
    compute_factor: float = 1.0
    prefill_sequence_s: float = 0.0

    def __post_init__(self) -> None:
        lo, hi = COMPUTE_FACTOR_BOUNDS
        if not lo <= self.compute_factor <= hi:
            raise InputError(
                f"compute_factor {self.compute_factor} is not physical",
                field="compute_factor",
                expected=f"a value in [{lo}, {hi}]",
            )
        for name in ("host_overhead_s", "all_reduce_hop_latency_s", "prefill_sequence_s"):
            if getattr(self, name) < 0.0:
                raise InputError(f"negative latency {getattr(self, name)}", field=name)

    def offsets(self) -> FloatArray:
        """Distance from the neutral stack, one entry per field (what predictions are affine in)."""
        neutral = StackCalibration()
        return np.asarray(
            [getattr(self, f.name) - getattr(neutral, f.name) for f in fields(self)],
            dtype=np.float64,
        )

    @classmethod
    def from_offsets(cls, offsets: Sequence[float]) -> StackCalibration:
        """Inverse of :meth:`offsets`."""
        neutral = cls()
        values = {
            f.name: getattr(neutral, f.name) + float(o)
            for f, o in zip(fields(cls), offsets, strict=True)
        }
        return cls(**values)

    def as_dict(self) -> dict[str, float]:
        return {f.name: float(getattr(self, f.name)) for f in fields(self)}


NEUTRAL_STACK = StackCalibration()
STACK_PARAMETERS: tuple[str, ...] = tuple(f.name for f in fields(StackCalibration))


class CalibratedCostModel:
    """``base`` (measured kernels) run under the serving stack ``stack``.

    Per iteration, relative to ``base``: the host overhead replaces ``base.framework_overhead_s``;
    ``linear_s(m)`` becomes ``floor + compute_factor·(linear_s(m) − floor)`` with
    ``floor = linear_s(1)``, plus ``2·layers·(tp−1)·all_reduce_hop_latency_s``; each prefill chunk
    costs ``compute_factor`` times its attention plus ``prefill_sequence_s``; decode attention
    coefficients are the base's. All methods are O(1).
    """

    def __init__(self, base: KernelCostModel, stack: StackCalibration) -> None:
        self.base = base
        self.stack = stack
        self.overhead_s = base.overhead_s - base.framework_overhead_s + stack.host_overhead_s
        self._floor_s = base.linear_s(1)
        calls = ALL_REDUCES_PER_LAYER * base.model.layers * (base.tp - 1)
        self.all_reduce_latency_s = calls * stack.all_reduce_hop_latency_s

    def linear_s(self, tokens: int) -> float:
        """Token-linear work of ``tokens`` tokens under the stack (s); 0 for no tokens."""
        if tokens <= 0:
            return 0.0
        kernels = self.base.linear_s(tokens)
        scaled = self._floor_s + self.stack.compute_factor * (kernels - self._floor_s)
        return scaled + self.all_reduce_latency_s

    def prefill_attention_s(self, chunk_tokens: int, context_tokens: int) -> float:
        """Attention of one prefill chunk plus the stack's per-sequence prefill cost (s)."""
        attention = self.base.prefill_attention_s(chunk_tokens, context_tokens)
        return self.stack.compute_factor * attention + self.stack.prefill_sequence_s

    def decode_attention_coeffs(self, n: int) -> tuple[float, float]:
        """The base's (fixed s, s per summed context token): decode attention is memory-bound."""
        return self.base.decode_attention_coeffs(n)

    def iteration_s(
        self, prefill_chunks: list[tuple[int, int]], n_decode: int, decode_context: int
    ) -> float:
        """One engine iteration: prefill ``[(chunk, context)]`` plus ``n_decode`` decodes (s)."""
        tokens = n_decode + sum(chunk for chunk, _ in prefill_chunks)
        attention = sum(self.prefill_attention_s(c, p) for c, p in prefill_chunks)
        d0, d1 = self.decode_attention_coeffs(n_decode)
        return self.overhead_s + self.linear_s(tokens) + attention + d0 + d1 * decode_context


def stack_sensitivities(
    base: KernelCostModel, predict: Callable[[IterationCostModel], float]
) -> tuple[float, tuple[float, ...]]:
    """(neutral prediction, d prediction / d offset per parameter) of one measured quantity.

    ``predict`` maps a cost model to a time (e.g. one prefill, a mean decode step). Predictions
    are affine in the stack's offsets, so ``predict(stack) = neutral + sensitivities · offsets``
    holds exactly for every stack.
    """
    neutral = predict(CalibratedCostModel(base, NEUTRAL_STACK))
    slopes: list[float] = []
    for name in STACK_PARAMETERS:
        unit = replace(NEUTRAL_STACK, **{name: getattr(NEUTRAL_STACK, name) + 1.0})
        slopes.append(predict(CalibratedCostModel(base, unit)) - neutral)
    return neutral, tuple(slopes)


# Typical magnitude of each offset (s, s, factor, s): the optimiser's variable scaling.
_OFFSET_SCALE = np.asarray([1e-2, 1e-5, 0.1, 1e-3])
_START = StackCalibration(
    host_overhead_s=5e-3, all_reduce_hop_latency_s=5e-6, prefill_sequence_s=1e-3
)


def predicted_s(
    neutral_s: FloatArray, sensitivities: FloatArray, stack: StackCalibration
) -> FloatArray:
    """Predicted times of many quantities under ``stack`` (see :func:`stack_sensitivities`)."""
    return neutral_s + sensitivities @ stack.offsets()


def fit_stack_calibration(
    measured_s: Sequence[float],
    neutral_s: Sequence[float],
    sensitivities: Sequence[Sequence[float]],
) -> StackCalibration:
    """The stack minimising a robust loss of ``log(predicted / measured)`` over the cases.

    One entry per measured quantity in each argument (``sensitivities`` row: one value per
    parameter, from :func:`stack_sensitivities`). Soft-L1 loss with scale
    :data:`ROBUST_LOG_SCALE`; bounds keep latencies ≥ 0 and ``compute_factor`` in
    :data:`COMPUTE_FACTOR_BOUNDS`. Raises :class:`InputError` with fewer cases than parameters or
    a non-positive measurement.
    """
    y = np.asarray(measured_s, dtype=np.float64)
    base = np.asarray(neutral_s, dtype=np.float64)
    slopes = np.asarray(sensitivities, dtype=np.float64).reshape(len(y), len(STACK_PARAMETERS))
    if len(y) < len(STACK_PARAMETERS):
        raise InputError(
            f"{len(y)} cases cannot determine {len(STACK_PARAMETERS)} stack parameters",
            field="measured_s",
            expected=f"at least {len(STACK_PARAMETERS)} cases",
        )
    if np.any(y <= 0.0):
        raise InputError("measured times must be positive", field="measured_s")
    lo, hi = COMPUTE_FACTOR_BOUNDS
    lower = np.asarray([0.0, 0.0, lo - 1.0, 0.0])
    upper = np.asarray([np.inf, np.inf, hi - 1.0, np.inf])

    def log_ratio(offsets: FloatArray) -> FloatArray:
        predicted = np.maximum(base + slopes @ offsets, 1e-12)
        return np.asarray(np.log(predicted / y), dtype=np.float64)

    result = least_squares(
        log_ratio,
        _START.offsets(),
        bounds=(lower, upper),
        loss="soft_l1",
        f_scale=ROBUST_LOG_SCALE,
        x_scale=_OFFSET_SCALE,
    )
    offsets = np.clip(result.x, lower, upper)
    return StackCalibration.from_offsets(offsets.tolist())
