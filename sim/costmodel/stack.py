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
- ``memory_factor``: multiplies the memory-bound kernel time of the token-linear work, its
  one-token floor (the weight read). ``> 1`` means the stack (or the accelerator, when the
  kernel times come from a datasheet) reads memory less efficiently.
- ``attention_factor``: multiplies decode attention (reading the KV cache), whose kernels differ
  more between stacks than GEMMs do.
- ``decode_sequence_s``: host time per decoding sequence per iteration (sampling, output
  processing, scheduler bookkeeping), which grows with the batch.
- ``all_reduce_byte_s``: time per byte of each all-reduce message beyond the table's, for a
  stack whose collective library moves large messages more slowly (charged with the ring's
  ``2·(tp−1)/tp`` share, 2 calls per layer).
- ``decode_flop_s``: time per weight FLOP of each decoding sequence per iteration (its
  ``2·active params / tp`` multiply-adds), for an engine whose GEMMs at decode batch sizes run
  far below the datasheet rate: each added sequence then costs in proportion to the parameters
  per GPU, which a roofline (memory-bound up to its knee) does not charge. ``1 / decode_flop_s``
  is that achieved rate. Profiled accelerators measured their GEMMs at every batch size and keep
  it at 0.

The first four are the defaults :func:`fit_stack_calibration` fits (``free``); the others are
fitted when asked, e.g. for an accelerator whose kernel times come from its datasheet.

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

from placement.domain.llm import ModelArchitecture
from placement.errors import InputError
from sim.costmodel.base import IterationCostModel
from sim.costmodel.interpolate import FloatArray
from sim.costmodel.operators import ALL_REDUCES_PER_LAYER
from sim.costmodel.tabulated import TabulatedCostModel

# Robust loss scale of the fit, on log(predicted / measured): residuals beyond ~10 % count
# linearly (soft L1) instead of quadratically, so a few broken measurements cannot dominate.
ROBUST_LOG_SCALE = 0.1
COMPUTE_FACTOR_BOUNDS = (0.5, 2.0)
MEMORY_FACTOR_BOUNDS = (0.5, 4.0)
ATTENTION_FACTOR_BOUNDS = (0.5, 20.0)


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
    memory_factor: float = 1.0
    attention_factor: float = 1.0
    decode_sequence_s: float = 0.0
    all_reduce_byte_s: float = 0.0
    decode_flop_s: float = 0.0

    def __post_init__(self) -> None:
        for name, (lo, hi) in (
            ("compute_factor", COMPUTE_FACTOR_BOUNDS),
            ("memory_factor", MEMORY_FACTOR_BOUNDS),
            ("attention_factor", ATTENTION_FACTOR_BOUNDS),
        ):
            value = getattr(self, name)
            if not lo <= value <= hi:
                raise InputError(
                    f"{name} {value} is not physical",
                    field=name,
                    expected=f"a value in [{lo}, {hi}]",
                )
        for name in (
            "host_overhead_s",
            "all_reduce_hop_latency_s",
            "prefill_sequence_s",
            "decode_sequence_s",
            "all_reduce_byte_s",
            "decode_flop_s",
        ):
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
# what a fit frees unless told otherwise: the stack's own software on measured kernels
DEFAULT_FREE: tuple[str, ...] = (
    "host_overhead_s",
    "all_reduce_hop_latency_s",
    "compute_factor",
    "prefill_sequence_s",
)


class CalibratedCostModel:
    """``base`` (measured kernels) run under the serving stack ``stack``.

    Per iteration, relative to ``base``: the host overhead replaces ``base.framework_overhead_s``;
    ``linear_s(m)`` becomes ``memory_factor·floor + compute_factor·(linear_s(m) − floor)`` with
    ``floor = linear_s(1)``, plus ``2·layers·(tp−1)·all_reduce_hop_latency_s`` and
    ``2·layers·2(tp−1)/tp·m·hidden·bytes·all_reduce_byte_s``; each prefill chunk costs
    ``compute_factor`` times its attention plus ``prefill_sequence_s``; decode attention is the
    base's times ``attention_factor``, plus ``decode_sequence_s`` and ``decode_flop_s`` times
    the sequence's ``2·active params / tp`` FLOPs per sequence. All methods are O(1).
    """

    def __init__(self, base: KernelCostModel, stack: StackCalibration) -> None:
        self.base = base
        self.stack = stack
        self.model = base.model
        self.tp = base.tp
        self.overhead_s = base.overhead_s - base.framework_overhead_s + stack.host_overhead_s
        self.framework_overhead_s = stack.host_overhead_s
        self._floor_s = base.linear_s(1)
        calls = ALL_REDUCES_PER_LAYER * base.model.layers * (base.tp - 1)
        self.all_reduce_latency_s = calls * stack.all_reduce_hop_latency_s
        per_sequence_flops = 2.0 * base.model.active_params / base.tp
        self._decode_sequence_s = stack.decode_sequence_s + stack.decode_flop_s * per_sequence_flops
        # a hand-over from one GPU to the next (an engine splitting the layers among its GPUs)
        self.hop_latency_s = stack.all_reduce_hop_latency_s
        ring = 2.0 * (base.tp - 1) / base.tp
        self._all_reduce_token_s = (
            ALL_REDUCES_PER_LAYER
            * base.model.layers
            * ring
            * base.model.hidden
            * base.model.dtype_bytes
            * stack.all_reduce_byte_s
        )

    def linear_s(self, tokens: int) -> float:
        """Token-linear work of ``tokens`` tokens under the stack (s); 0 for no tokens."""
        if tokens <= 0:
            return 0.0
        kernels = self.base.linear_s(tokens)
        stack = self.stack
        scaled = stack.memory_factor * self._floor_s + stack.compute_factor * (
            kernels - self._floor_s
        )
        return scaled + self.all_reduce_latency_s + self._all_reduce_token_s * tokens

    def prefill_attention_s(self, chunk_tokens: int, context_tokens: int) -> float:
        """Attention of one prefill chunk plus the stack's per-sequence prefill cost (s)."""
        attention = self.base.prefill_attention_s(chunk_tokens, context_tokens)
        return self.stack.compute_factor * attention + self.stack.prefill_sequence_s

    def decode_attention_coeffs(self, n: int) -> tuple[float, float]:
        """The base's (fixed s, s per summed context token) times the attention factor, plus the
        stack's per-sequence time (host and weight FLOPs)."""
        d0, d1 = self.base.decode_attention_coeffs(n)
        factor = self.stack.attention_factor
        return (factor * d0 + n * self._decode_sequence_s, factor * d1)

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


# Typical magnitude of each offset (in field order): the optimiser's variable scaling.
_OFFSET_SCALE = np.asarray([1e-2, 1e-5, 0.1, 1e-3, 0.1, 0.1, 1e-5, 1e-11, 1e-14])
_START = StackCalibration(
    host_overhead_s=5e-3, all_reduce_hop_latency_s=5e-6, prefill_sequence_s=1e-3
)
# How far from neutral a parameter may go for one unit of shrinkage (in field order).
_SHRINK_SCALE = np.asarray([2e-2, 2e-5, 1.0, 5e-3, 1.0, 2.0, 1e-3, 1e-10, 1e-13])
_FACTORS = (COMPUTE_FACTOR_BOUNDS, MEMORY_FACTOR_BOUNDS, ATTENTION_FACTOR_BOUNDS)
(_C, _M, _A) = _FACTORS
_LOWER = np.asarray([0.0, 0.0, _C[0] - 1.0, 0.0, _M[0] - 1.0, _A[0] - 1.0, 0.0, 0.0, 0.0])
_UPPER = np.asarray(
    [np.inf, np.inf, _C[1] - 1.0, np.inf, _M[1] - 1.0, _A[1] - 1.0, np.inf, np.inf, np.inf]
)


def _full_width(rows: FloatArray) -> FloatArray:
    """Sensitivity rows padded with zeros for parameters they leave out (rows written for the
    first, default parameters only)."""
    missing = len(STACK_PARAMETERS) - rows.shape[1]
    if missing < 0:
        raise InputError(
            f"{rows.shape[1]} sensitivities per case", expected=f"at most {len(STACK_PARAMETERS)}"
        )
    return np.pad(rows, ((0, 0), (0, missing)))


def predicted_s(
    neutral_s: FloatArray, sensitivities: FloatArray, stack: StackCalibration
) -> FloatArray:
    """Predicted times of many quantities under ``stack`` (see :func:`stack_sensitivities`)."""
    rows = _full_width(np.atleast_2d(np.asarray(sensitivities, dtype=np.float64)))
    return np.asarray(neutral_s + rows @ stack.offsets(), dtype=np.float64)


def fit_stack_calibration(
    measured_s: Sequence[float],
    neutral_s: Sequence[float],
    sensitivities: Sequence[Sequence[float]],
    *,
    free: Sequence[str] = DEFAULT_FREE,
    shrink: float = 0.0,
) -> StackCalibration:
    """The stack minimising a robust loss of ``log(predicted / measured)`` over the cases.

    One entry per measured quantity in each argument (``sensitivities`` row: one value per
    parameter, from :func:`stack_sensitivities`); only the parameters named in ``free`` move
    (the others stay neutral). ``shrink > 0`` adds ``shrink · offset / typical size`` per free
    parameter to the residuals (:data:`_SHRINK_SCALE`): with few cases, parameters the data
    do not pin down stay near the neutral stack. Soft-L1 loss with scale
    :data:`ROBUST_LOG_SCALE`; bounds keep
    latencies ≥ 0 and the factors in :data:`COMPUTE_FACTOR_BOUNDS` / :data:`MEMORY_FACTOR_BOUNDS`.
    Raises :class:`InputError` with fewer cases than free parameters, an unknown parameter or a
    non-positive measurement.
    """
    y = np.asarray(measured_s, dtype=np.float64)
    base = np.asarray(neutral_s, dtype=np.float64)
    slopes = _full_width(np.asarray(sensitivities, dtype=np.float64).reshape(len(y), -1))
    unknown = [name for name in free if name not in STACK_PARAMETERS]
    if unknown:
        raise InputError(
            f"unknown stack parameter(s) {', '.join(unknown)}",
            field="free",
            expected=", ".join(STACK_PARAMETERS),
        )
    cols = [STACK_PARAMETERS.index(name) for name in free]
    if len(y) < (len(cols) if shrink <= 0.0 else 1):
        raise InputError(
            f"{len(y)} cases cannot determine {len(cols)} stack parameters",
            field="measured_s",
            expected=f"at least {len(cols)} cases",
        )
    if np.any(y <= 0.0):
        raise InputError("measured times must be positive", field="measured_s")
    # optimised in units of each parameter's typical size (:data:`_OFFSET_SCALE`): the
    # finite-difference Jacobian steps a variable by ~1.5e-8·max(1, |x|), i.e. ~1e3 times the
    # range of a parameter in s/byte (~1e-11) and ~1e-3 of one in s per hop (~1e-5), so in raw
    # units the Jacobian of those was wrong and the fit stopped short of its optimum
    unit = _OFFSET_SCALE[cols]
    lower, upper = _LOWER[cols] / unit, _UPPER[cols] / unit
    sub = slopes[:, cols] * unit

    scale = _SHRINK_SCALE[cols] / unit

    def log_ratio(x: FloatArray) -> FloatArray:
        predicted = np.maximum(base + sub @ x, 1e-12)
        residuals = np.log(predicted / y)
        if shrink > 0.0:
            residuals = np.concatenate([residuals, shrink * x / scale])
        return np.asarray(residuals, dtype=np.float64)

    from scipy.optimize import least_squares  # heavy: imported only when fitting

    result = least_squares(
        log_ratio,
        np.clip(_START.offsets()[cols] / unit, lower, upper),
        bounds=(lower, upper),
        loss="soft_l1",
        f_scale=ROBUST_LOG_SCALE,
    )
    offsets = np.zeros(len(STACK_PARAMETERS))
    offsets[cols] = np.clip(result.x, lower, upper) * unit
    return StackCalibration.from_offsets(offsets.tolist())


def calibrate_tables(cm: TabulatedCostModel, stack: StackCalibration) -> None:
    """Apply ``stack`` to a freshly tabulated kernel model in place (what
    :class:`CalibratedCostModel` computes, kept as list lookups for the simulator's hot path).

    ``cm`` must carry ``model``, ``tp``, ``framework_overhead_s`` and the measured-table form of
    prefill attention (``_per_token``, ``_per_pair``, ``_per_chunk``), as
    :class:`~sim.costmodel.profiled.ProfiledCostModel` does.
    """
    calibrated = CalibratedCostModel(cm, stack)  # type: ignore[arg-type]
    linear = [calibrated.linear_s(m) for m in range(cm._max_tokens + 1)]
    decode = [calibrated.decode_attention_coeffs(n) for n in range(cm._max_seqs + 1)]
    cm._linear = linear
    cm._decode = decode
    cm.overhead_s = calibrated.overhead_s
    cm.framework_overhead_s = stack.host_overhead_s  # type: ignore[attr-defined]
    cm._per_token *= stack.compute_factor  # type: ignore[attr-defined]
    cm._per_pair *= stack.compute_factor  # type: ignore[attr-defined]
    cm._per_chunk = stack.prefill_sequence_s  # type: ignore[attr-defined]
